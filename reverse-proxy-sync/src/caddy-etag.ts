// Caddy 2.6's ETag of a config path, made here for a value this process wrote,
// so the next write can be conditional (If-Match) without reading the config
// first. Caddy 2.6.2 (admin.go, measured): the ETag of a read of <path> is
// `"<path> <hex FNV-1a 32 of the body>"`, the body being Go's json.Encoder
// output of the stored value (object keys sorted, no spaces, <, > and &
// escaped, a newline at the end); a write with If-Match is refused with 412
// unless the value now at that path hashes to it. Caddy stores what it was sent
// as Go decodes it (objects as maps, numbers as float64), so the value sent
// encodes the same way on the way back.
//
// A wrong guess here costs a re-read, never a lost write: Caddy compares, and
// a mismatch is a 412. Newer Caddy hashes with xxhash instead: the writer
// checks a read's ETag against fnv32aEtag of its body before it trusts a guess.

/** FNV-1a, 32 bits, of the UTF-8 bytes of `text`, as 8 hex digits. */
function fnv32a(text: string): string {
  const bytes = Buffer.from(text, "utf8");
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  h >>>= 0;
  return h.toString(16).padStart(8, "0");
}

/**
 * What JSON.stringify writes that Go writes otherwise: escape pairs (consumed whole, so an
 * escaped backslash is never read as the start of another), and the characters Go escapes.
 */
const NOT_GO = /\\(?:[bf]|ud[89a-f][0-9a-f]{2}|.)|[<>&\u2028\u2029]/g;
/** Whether a JSON.stringify output may hold any of them (NOT_GO is global, so stateful in test()). */
const MAYBE_NOT_GO = /\\[bfu]|[<>&\u2028\u2029]/;

function toGo(match: string): string {
  switch (match) {
    case "\\b":
      return "\\u0008";
    case "\\f":
      return "\\u000c";
    case "<":
      return "\\u003c";
    case ">":
      return "\\u003e";
    case "&":
      return "\\u0026";
    case "\u2028":
      return "\\u2028";
    case "\u2029":
      return "\\u2029";
  }
  // A lone surrogate (JSON.stringify escapes it): Go writes U+FFFD; any other pair stays.
  return /^\\ud[89a-f]/.test(match) ? "\\ufffd" : match;
}

/** A string as Go's encoding/json writes it (HTML-safe, \n \r \t short, other controls as \u00xx). */
function goString(s: string): string {
  const json = JSON.stringify(s);
  return MAYBE_NOT_GO.test(json) ? json.replace(NOT_GO, toGo) : json;
}

/** `value` as Go's json.Encoder writes what json.Unmarshal made of it (without the newline). */
export function goJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(goJson).join(",")}]`;
  if (typeof value === "string") return goString(value);
  if (value !== null && typeof value === "object") {
    const o = value as Record<string, unknown>;
    // Go sorts keys by their UTF-8 bytes; JavaScript's sort compares UTF-16 units, the same
    // order for every key below U+D800 (a config's keys are ASCII).
    const keys = Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${goString(k)}:${goJson(o[k])}`).join(",")}}`;
  }
  // Numbers: Go's float64 and JavaScript print the shortest form alike (exponents from 1e21 and
  // below 1e-6, "e-7" not "e-07"). A guess that is wrong is only a 412.
  return JSON.stringify(value ?? null);
}

/** The ETag Caddy 2.6 gives a read of `path` whose body is `body` (with its newline). */
export function fnv32aEtag(path: string, body: string): string {
  return `"${path} ${fnv32a(body)}"`;
}

/** The ETag Caddy 2.6 will give `path` once `value` is stored there. */
export function caddyEtagOf(path: string, value: unknown): string {
  return fnv32aEtag(path, `${goJson(value)}\n`);
}
