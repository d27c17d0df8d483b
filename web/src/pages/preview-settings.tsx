// An application's preview settings (PATCH /api/applications/{id} {previews}): on or off,
// the hostname pattern, the cap, fork pull requests, whether production's secrets are
// copied, and the preview containers' limits. A refusal is said in the form's words.
import { type Application, type PreviewSettings, patch } from "../api";
import { Form, field } from "../ui";
import { fieldErrorOf } from "./field-errors";

const DEFAULTS: PreviewSettings = {
  enabled: false,
  domain_pattern: null,
  max: 5,
  allow_forks: false,
  copy_secrets: false,
  memory_mb: null,
  cpus: null,
};

/** The API's paths (previews.max: …) in the form's words. */
const SPECS = {
  previews: { field: "enabled", label: "Previews" },
  "previews.enabled": { field: "enabled", label: "Previews" },
  "previews.domain_pattern": { field: "domain_pattern", label: "Hostname pattern" },
  "previews.max": { field: "max", label: "At most" },
  "previews.allow_forks": { field: "allow_forks", label: "Previews of forks" },
  "previews.copy_secrets": { field: "copy_secrets", label: "Copy production's values" },
  "previews.memory_mb": { field: "memory_mb", label: "Memory" },
  "previews.cpus": { field: "cpus", label: "CPUs" },
};

const numberOrNull = (s: string) => (s === "" ? null : Number(s));

export function PreviewSettingsForm({ app, onSaved }: { app: Application; onSaved: () => void }) {
  const s = { ...DEFAULTS, ...app.previews };
  const id = (n: string) => `pv-${app.id.slice(0, 8)}-${n}`;
  return (
    <Form
      label="Preview settings"
      submit="Save preview settings"
      onSubmit={async (f) => {
        const on = (n: string) => (f.elements.namedItem(n) as HTMLInputElement).checked;
        const previews: PreviewSettings = {
          enabled: on("enabled"),
          domain_pattern: field(f, "domain_pattern") || null,
          max: Number(field(f, "max") || 5),
          allow_forks: on("allow_forks"),
          copy_secrets: on("copy_secrets"),
          memory_mb: numberOrNull(field(f, "memory_mb")),
          cpus: numberOrNull(field(f, "cpus")),
        };
        try {
          await patch(`/api/applications/${app.id}`, { previews });
        } catch (err) {
          const e = fieldErrorOf(err, SPECS);
          throw e ? new Error(`Not saved: ${e.text}`) : err;
        }
        onSaved();
      }}
    >
      <label class="check">
        <input name="enabled" type="checkbox" defaultChecked={s.enabled} />
        Deploy a preview of each pull request (and of previews made here or by CI)
      </label>
      <div class="grid">
        <label>
          Hostname pattern
          <input
            name="domain_pattern"
            defaultValue={s.domain_pattern ?? ""}
            placeholder="pr-{number}.{app}.preview.example.com"
            autoComplete="off"
            spellcheck={false}
            aria-describedby={id("domain_pattern-hint")}
          />
        </label>
        <label>
          At most (previews)
          <input name="max" type="number" min={1} max={50} defaultValue={String(s.max)} />
        </label>
        <label>
          Memory per preview (MB, empty: no limit)
          <input name="memory_mb" type="number" min={6} defaultValue={s.memory_mb?.toString() ?? ""} />
        </label>
        <label>
          CPUs per preview (empty: no limit)
          <input name="cpus" type="number" min={0.1} step={0.1} defaultValue={s.cpus?.toString() ?? ""} />
        </label>
      </div>
      <p class="hint" id={id("domain_pattern-hint")}>
        Hostname pattern: <code>{"{number}"}</code> the pull request's number (an API preview's name),{" "}
        <code>{"{key}"}</code> the preview's name, <code>{"{app}"}</code> this application. Empty: the default
        hostname scheme. When more than the most are open, the preview idle longest is stopped.
      </p>
      <label class="check">
        <input name="allow_forks" type="checkbox" defaultChecked={s.allow_forks} />
        Build pull requests from forks too (never with this application's secrets)
      </label>
      <label class="check">
        <input name="copy_secrets" type="checkbox" defaultChecked={s.copy_secrets} />
        Copy production's values for variables without a preview value
      </label>
    </Form>
  );
}
