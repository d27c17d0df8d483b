// A server's labels (issue 33): key=value pairs a fleet application's placement
// selects servers by. Shown as chips on the Servers list and the server's page;
// owners add and remove them there, each change saved at once (PUT
// /api/servers/{id}/labels replaces them all), a bad key or value told beside its
// field in the API's own rule, before anything is sent.
import { useState } from "preact/hooks";
import { put } from "../api";
import { ErrorNote, messageOf } from "../ui";
import "./fleets.css";

export type Labels = Record<string, string>;

// The API's rule (control-plane/src/fleets/labels.ts), checked here so the person reads it at once.
const PART = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;
const KEY_RULE =
  "a key is 1 to 63 letters, digits, '.', '_' or '-', starting and ending with a letter or digit";
const VALUE_RULE =
  "a value is empty or 1 to 63 letters, digits, '.', '_' or '-', starting and ending with a letter or digit";

/** The labels as k=v chips, sorted by key; "none" when there are none. */
export function LabelChips({ labels, none = "—" }: { labels: Labels | undefined; none?: string }) {
  const pairs = Object.entries(labels ?? {}).sort(([a], [b]) => a.localeCompare(b));
  if (pairs.length === 0) return <>{none}</>;
  return (
    <ul class="chips" aria-label="Labels">
      {pairs.map(([k, v]) => (
        <li key={k} class="chip">
          {k}={v}
        </li>
      ))}
    </ul>
  );
}

/** Owners' editor: each chip has a remove button, and a key and value add one (or change its value). */
export function LabelsEditor({
  serverId,
  labels,
  onSaved,
}: { serverId: string; labels: Labels; onSaved: (labels: Labels) => void }) {
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [fieldError, setFieldError] = useState<{ field: "key" | "value"; text: string }>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const save = async (next: Labels) => {
    setBusy(true);
    setError(undefined);
    try {
      const answer = await put<{ labels: Labels }>(`/api/servers/${encodeURIComponent(serverId)}/labels`, {
        labels: next,
      });
      onSaved(answer.labels);
      return true;
    } catch (err) {
      setError(`Labels not saved: ${messageOf(err)}`);
      return false;
    } finally {
      setBusy(false);
    }
  };
  const add = async (e: Event) => {
    e.preventDefault();
    const k = key.trim();
    const v = value.trim();
    if (!PART.test(k)) return setFieldError({ field: "key", text: `Key: ${KEY_RULE}.` });
    if (v !== "" && !PART.test(v)) return setFieldError({ field: "value", text: `Value: ${VALUE_RULE}.` });
    setFieldError(undefined);
    if (await save({ ...labels, [k]: v })) {
      setKey("");
      setValue("");
    }
  };
  const pairs = Object.entries(labels).sort(([a], [b]) => a.localeCompare(b));
  const invalid = (f: "key" | "value") => (fieldError?.field === f ? ("true" as const) : undefined);
  const described = (f: "key" | "value") => (fieldError?.field === f ? "label-error" : undefined);
  return (
    <div class="labels-editor">
      {pairs.length === 0 ? (
        <p class="hint">No labels yet.</p>
      ) : (
        <ul class="chips" aria-label="Labels">
          {pairs.map(([k, v]) => (
            <li key={k} class="chip">
              {k}={v}
              <button
                type="button"
                aria-label={`Remove label ${k}=${v}`}
                disabled={busy}
                onClick={() => {
                  const { [k]: _, ...rest } = labels;
                  save(rest);
                }}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      <form class="label-add" aria-label="Add a label" onSubmit={add}>
        <div class="field">
          <label for="label-key">Key</label>
          <input
            id="label-key"
            name="key"
            value={key}
            onInput={(e) => setKey(e.currentTarget.value)}
            aria-invalid={invalid("key")}
            aria-describedby={described("key")}
            placeholder="region"
            autoComplete="off"
            spellcheck={false}
            required
          />
        </div>
        <div class="field">
          <label for="label-value">Value</label>
          <input
            id="label-value"
            name="value"
            value={value}
            onInput={(e) => setValue(e.currentTarget.value)}
            aria-invalid={invalid("value")}
            aria-describedby={described("value")}
            placeholder="eu"
            autoComplete="off"
            spellcheck={false}
          />
        </div>
        <button type="submit" disabled={busy}>
          {busy ? "Saving…" : "Add label"}
        </button>
      </form>
      {fieldError && (
        <p class="field-error" id="label-error" role="alert">
          {fieldError.text}
        </p>
      )}
      <ErrorNote message={error} />
      <p class="hint">
        A key already there takes the new value. Fleet applications with a label selector move at their next
        deploy.
      </p>
    </div>
  );
}
