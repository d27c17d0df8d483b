// A refusal of a form's request, put beside the field it is about. The API's
// details start with the field they are about, as a path of the request body
// ("fqdns[0]: ...", "fqdns.0: ...", "build.image: ...", "name: ..."); a form maps
// those paths to its own fields and labels, so the person reads "Domain 1: ..."
// beside the Domains box, never `fqdns[0]`.
import { ApiError } from "../api";

export interface FieldSpec<F extends string> {
  /** The form's field (its control's name) the error goes beside. */
  field: F;
  /** How the page calls it. */
  label: string;
  /** For a list field: what one entry is called ("Domain" gives "Domain 1"). */
  item?: string;
}

export interface FieldError<F extends string> {
  field: F;
  /** The field's label, or the list entry's ("Domain 1"). */
  label: string;
  /** The whole sentence shown: "Domain 1: 'x' is not a valid domain name". */
  text: string;
}

const DETAIL = /^([a-z_]+)(?:\[(\d+)\]|\.(\d+))?((?:\.[a-z_]+)*): ([\s\S]+)$/;

/**
 * The field and words of an API refusal, or undefined when it is about no field
 * of the form (a 503, an unknown path): the form then shows the detail as it is.
 * `mentions` turns API field names inside the message into words.
 */
export function fieldErrorOf<F extends string>(
  err: unknown,
  specs: Record<string, FieldSpec<F>>,
  mentions: Record<string, string> = {},
): FieldError<F> | undefined {
  if (!(err instanceof ApiError) || err.status < 400 || err.status >= 500) return undefined;
  const m = DETAIL.exec(err.detail);
  if (!m) return undefined;
  const [, base = "", bracket, dotted, sub = "", message = ""] = m;
  const spec = specs[`${base}${sub}`] ?? specs[base];
  if (!spec) return undefined;
  const index = bracket ?? dotted;
  const label = index !== undefined && spec.item ? `${spec.item} ${Number(index) + 1}` : spec.label;
  let words = message;
  for (const [name, phrase] of Object.entries(mentions))
    words = words.replace(new RegExp(`\\b${name}\\b`, "g"), phrase);
  return { field: spec.field, label, text: `${label}: ${words}` };
}
