// The application's fields (source, build, port, health check, domains, auto-deploy and
// which pushes deploy: deploy_tags, watch_paths; where it runs and its rollout
// strategy, app-fleet.tsx),
// one form for creating and for editing. Edit sends only the fields that changed.
// Every field is held in state, so a refused save keeps what the person typed (a
// re-render used to put the stored values back), and the refusal is shown beside
// its field in words (field-errors.ts), that field focused.
import "./app-form.css";
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Application, Build, Server } from "../api";
import { Form, lines } from "../ui";
import {
  FLEET_SPECS,
  FleetFields,
  type FleetName,
  type FleetValues,
  fleetBodyOf,
  fleetValuesOf,
} from "./app-fleet";
import { type FieldError, type FieldSpec, fieldErrorOf } from "./field-errors";

export type AppBody = Record<string, unknown>;

interface Values {
  name: string;
  server_id: string;
  linked_container_name: string;
  container_port: string;
  fqdns: string;
  git_repository: string;
  deploy_branch: string;
  build_type: string;
  dockerfile: string;
  context: string;
  image: string;
  health_check_path: string;
  health_check_timeout_seconds: string;
  auto_deploy: boolean;
  deploy_tags: string;
  watch_paths: string;
}
type Name = keyof Values;

/** The API's field paths (the start of a refusal's detail) as this form's fields. */
const SPECS: Record<string, FieldSpec<Name>> = {
  name: { field: "name", label: "Name" },
  server_id: { field: "server_id", label: "Server" },
  linked_container_name: { field: "linked_container_name", label: "Container name" },
  container_port: { field: "container_port", label: "Container port" },
  fqdns: { field: "fqdns", label: "Domains", item: "Domain" },
  git_repository: { field: "git_repository", label: "Git repository URL" },
  git_credential: { field: "git_repository", label: "Git credential" },
  deploy_branch: { field: "deploy_branch", label: "Deploy branch" },
  build: { field: "build_type", label: "Build" },
  "build.dockerfile": { field: "dockerfile", label: "Dockerfile" },
  "build.context": { field: "context", label: "Build context" },
  "build.image": { field: "image", label: "Image" },
  health_check_path: { field: "health_check_path", label: "Health check path" },
  health_check_timeout_seconds: { field: "health_check_timeout_seconds", label: "Health check timeout" },
  auto_deploy: { field: "auto_deploy", label: "Automatic deploys" },
  deploy_tags: { field: "deploy_tags", label: "Tags that deploy" },
  watch_paths: { field: "watch_paths", label: "Watched paths", item: "Watched path" },
};

/** API field names a message may mention, in the form's words. */
const MENTIONS = {
  git_repository: "a Git repository URL",
  git_credential: "a Git credential",
  dockerfile: "Dockerfile",
  deploy_tags: "the tag pattern",
  watch_paths: "the watched paths",
};

function valuesOf(app: Application | undefined, servers: Server[]): Values {
  return {
    name: app?.name ?? "",
    server_id: app?.server_id ?? servers[0]?.id ?? "",
    linked_container_name: app?.linked_container_name ?? "",
    container_port: String(app?.container_port ?? 8080),
    fqdns: app?.fqdns.join("\n") ?? "",
    git_repository: app?.git_repository ?? "",
    deploy_branch: app?.deploy_branch ?? "",
    build_type: app ? (app.build?.type ?? "none") : "dockerfile",
    dockerfile: app?.build?.dockerfile ?? "Dockerfile",
    context: app?.build?.context ?? ".",
    image: app?.build?.image ?? "",
    health_check_path: app?.health_check_path ?? "/",
    health_check_timeout_seconds: String(app?.health_check_timeout_seconds ?? 30),
    auto_deploy: app?.auto_deploy ?? false,
    deploy_tags: app?.deploy_tags ?? "",
    watch_paths: app?.watch_paths?.join("\n") ?? "",
  };
}

function bodyOf(v: Values, app: Application | undefined): AppBody {
  const build: Build =
    v.build_type === "image"
      ? {
          type: "image",
          image: v.image.trim(),
          // Kept as it is: the form does not edit it.
          ...(app?.build?.registry_credential_id
            ? { registry_credential_id: app.build.registry_credential_id }
            : {}),
        }
      : {
          type: "dockerfile",
          dockerfile: v.dockerfile.trim() || "Dockerfile",
          context: v.context.trim() || ".",
        };
  const body: AppBody = {
    name: v.name.trim(),
    server_id: v.server_id,
    linked_container_name: v.linked_container_name.trim(),
    container_port: Number(v.container_port),
    fqdns: lines(v.fqdns),
    git_repository: v.git_repository.trim() || null,
    build: v.build_type === "none" ? null : build,
    health_check_path: v.health_check_path.trim() || "/",
    health_check_timeout_seconds: Number(v.health_check_timeout_seconds || 30),
    auto_deploy: v.auto_deploy,
    // Empty means "not set" (null), which the API reads as: no tag deploys, every push does.
    deploy_tags: v.deploy_tags.trim() || null,
    watch_paths: lines(v.watch_paths).length > 0 ? lines(v.watch_paths) : null,
  };
  if (v.deploy_branch.trim()) body.deploy_branch = v.deploy_branch.trim();
  return body;
}

/** The stored build as the form would send it (no null credential), to compare. */
function storedOf(app: Application): AppBody {
  const out = { ...(app as unknown as AppBody) };
  if (app.build?.type === "image" && !app.build.registry_credential_id)
    out.build = { type: "image", image: app.build.image };
  return out;
}

/** The fields whose value differs from the application's (PATCH needs at least one). */
function changed(body: AppBody, app: Application): AppBody {
  const stored = storedOf(app);
  const out: AppBody = {};
  for (const [k, v] of Object.entries(body)) if (JSON.stringify(v) !== JSON.stringify(stored[k])) out[k] = v;
  return out;
}

export function AppForm({
  app,
  servers,
  submit,
  onSave,
}: {
  app?: Application;
  servers: Server[];
  submit: string;
  onSave: (body: AppBody) => Promise<unknown>;
}) {
  const [v, setV] = useState<Values>(() => valuesOf(app, servers));
  const [fleet, setFleet] = useState<FleetValues>(() => fleetValuesOf(app, servers));
  const [error, setError] = useState<FieldError<Name | FleetName>>();
  const fields = useRef<HTMLDivElement>(null);
  const p = app ? `edit-${app.id.slice(0, 8)}` : "new";
  const errId = `${p}-error`;

  // The field in error takes focus once it is marked, so the person lands on it.
  useEffect(() => {
    if (error) fields.current?.querySelector<HTMLElement>(`[name="${error.field}"]`)?.focus();
  }, [error]);

  const set = (name: Name, value: string | boolean) => {
    setV((old) => ({ ...old, [name]: value }));
    if (error?.field === name) setError(undefined);
  };
  const setFleetValue = <K extends FleetName>(name: K, value: FleetValues[K]) => {
    setFleet((old) => ({ ...old, [name]: value }));
    if (error?.field === name) setError(undefined);
  };
  /** A control's value, change handler and error state. */
  const ctl = (name: Exclude<Name, "auto_deploy">, hint?: string) => ({
    name,
    id: `${p}-${name}`,
    value: v[name],
    onInput: (e: Event) => set(name, (e.currentTarget as HTMLInputElement).value),
    "aria-invalid": error?.field === name ? ("true" as const) : undefined,
    "aria-describedby":
      [hint ? `${p}-${name}-hint` : "", error?.field === name ? errId : ""].filter(Boolean).join(" ") ||
      undefined,
  });
  /** A field's help text, which its control names in aria-describedby (ctl's hint). */
  const help = (name: Name, text: ComponentChildren) => (
    <span class="hint" id={`${p}-${name}-hint`}>
      {text}
    </span>
  );
  const note = (name: Name) =>
    error?.field === name ? (
      <span class="field-error" id={errId}>
        {error.text}
      </span>
    ) : null;
  // A plain function, not a component: a component made in render would be a new type at
  // every render, and Preact would replace the input (and its focus) at each key press.
  const field = (name: Name, label: string, control: ComponentChildren) => (
    <div class="field">
      <label for={`${p}-${name}`}>{label}</label>
      {control}
      {note(name)}
    </div>
  );

  return (
    <Form
      label={app ? "Edit application" : "New application"}
      submit={submit}
      onSubmit={async () => {
        setError(undefined);
        const body = { ...bodyOf(v, app), ...fleetBodyOf(fleet, app, servers) };
        try {
          await onSave(app ? changed(body, app) : body);
        } catch (err) {
          const e = fieldErrorOf<Name | FleetName>(err, { ...SPECS, ...FLEET_SPECS }, MENTIONS);
          if (!e) throw err;
          setError(e);
          // The form's own note says it was not saved and where to look.
          throw new Error(`Not saved: check ${e.label} above.`);
        }
      }}
    >
      <div class="app-fields" ref={fields}>
        <div class="grid">
          {field("name", "Name", <input {...ctl("name")} required maxLength={128} autoComplete="off" />)}
          {field(
            "server_id",
            "Server",
            <select {...ctl("server_id")} required>
              {servers.map((s) => (
                <option key={s.id} value={s.id}>
                  {s.name}
                </option>
              ))}
            </select>,
          )}
          {field(
            "linked_container_name",
            "Container name",
            <input
              {...ctl("linked_container_name")}
              required
              pattern="[a-zA-Z0-9][a-zA-Z0-9_.\-]*"
              maxLength={255}
              autoComplete="off"
            />,
          )}
          {field(
            "container_port",
            "Container port",
            <input {...ctl("container_port")} type="number" min={1} max={65535} required />,
          )}
        </div>
        {field("fqdns", "Domains (one per line)", <textarea {...ctl("fqdns")} rows={2} />)}
        <fieldset>
          <legend>Source and build</legend>
          <div class="grid">
            {field(
              "git_repository",
              "Git repository URL",
              <input {...ctl("git_repository")} placeholder="https://git.example.com/org/app.git" />,
            )}
            {field("deploy_branch", "Deploy branch", <input {...ctl("deploy_branch")} placeholder="main" />)}
            {field(
              "build_type",
              "Build",
              <select {...ctl("build_type")}>
                <option value="dockerfile">Dockerfile in the repository</option>
                <option value="image">Pull an image</option>
                <option value="none">None (external deploy only)</option>
              </select>,
            )}
            {v.build_type === "dockerfile" && (
              <>
                {field("dockerfile", "Dockerfile", <input {...ctl("dockerfile")} />)}
                {field("context", "Build context", <input {...ctl("context")} />)}
              </>
            )}
            {v.build_type === "image" &&
              field(
                "image",
                "Image",
                <input {...ctl("image")} required placeholder="registry.example.com/app:1.0" />,
              )}
          </div>
        </fieldset>
        <fieldset>
          <legend>Health check</legend>
          <div class="grid">
            {field("health_check_path", "Path", <input {...ctl("health_check_path")} />)}
            {field(
              "health_check_timeout_seconds",
              "Timeout (seconds)",
              <input {...ctl("health_check_timeout_seconds")} type="number" min={1} max={600} />,
            )}
          </div>
        </fieldset>
        {!app?.preview_of && (
          <FleetFields v={fleet} set={setFleetValue} servers={servers} p={p} error={error} errId={errId} />
        )}
        <div class="field">
          <label class="check" for={`${p}-auto_deploy`}>
            <input
              id={`${p}-auto_deploy`}
              name="auto_deploy"
              type="checkbox"
              checked={v.auto_deploy}
              onChange={(e) => set("auto_deploy", e.currentTarget.checked)}
              aria-invalid={error?.field === "auto_deploy" ? "true" : undefined}
              aria-describedby={error?.field === "auto_deploy" ? errId : undefined}
            />
            Deploy automatically on a push to the deploy branch
          </label>
          {note("auto_deploy")}
        </div>
        <fieldset>
          <legend>Which pushes deploy (GitHub)</legend>
          {field(
            "deploy_tags",
            "Tags that deploy",
            <>
              <input {...ctl("deploy_tags", "hint")} placeholder="v*" autoComplete="off" spellcheck={false} />
              {help(
                "deploy_tags",
                <>
                  A pushed tag matching this pattern deploys the commit it names (<code>*</code> any
                  characters, <code>?</code> one). Empty: tags do not deploy.
                </>,
              )}
            </>,
          )}
          {field(
            "watch_paths",
            "Watched paths (one per line)",
            <>
              <textarea
                {...ctl("watch_paths", "hint")}
                rows={2}
                placeholder="services/api/**"
                spellcheck={false}
              />
              {help(
                "watch_paths",
                <>
                  A push to the deploy branch deploys only when a changed file matches one of these globs (
                  <code>**</code> crosses folders). Empty: every push deploys.
                </>,
              )}
            </>,
          )}
        </fieldset>
      </div>
    </Form>
  );
}
