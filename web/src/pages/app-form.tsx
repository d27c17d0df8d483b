// The application's fields (source, build, port, health check, domains, auto-deploy),
// one form for creating and for editing. Edit sends only the fields that changed.
import { useState } from "preact/hooks";
import type { Application, Build, Server } from "../api";
import { Form, field, lines } from "../ui";

export type AppBody = Record<string, unknown>;

function bodyOf(f: HTMLFormElement, servers: Server[]): AppBody {
  const buildType = field(f, "build_type");
  const build: Build =
    buildType === "image"
      ? { type: "image", image: field(f, "image") }
      : {
          type: "dockerfile",
          dockerfile: field(f, "dockerfile") || "Dockerfile",
          context: field(f, "context") || ".",
        };
  const repo = field(f, "git_repository");
  const body: AppBody = {
    name: field(f, "name"),
    server_id: field(f, "server_id") || servers[0]?.id,
    linked_container_name: field(f, "linked_container_name"),
    container_port: Number(field(f, "container_port")),
    fqdns: lines(field(f, "fqdns")),
    git_repository: repo || null,
    build: buildType === "none" ? null : build,
    health_check_path: field(f, "health_check_path") || "/",
    health_check_timeout_seconds: Number(field(f, "health_check_timeout_seconds") || 30),
    auto_deploy: (f.elements.namedItem("auto_deploy") as HTMLInputElement).checked,
  };
  const branch = field(f, "deploy_branch");
  if (branch) body.deploy_branch = branch;
  return body;
}

/** The fields whose value differs from the application's (PATCH needs at least one). */
function changed(body: AppBody, app: Application): AppBody {
  const out: AppBody = {};
  for (const [k, v] of Object.entries(body))
    if (JSON.stringify(v) !== JSON.stringify((app as unknown as AppBody)[k])) out[k] = v;
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
  const [buildType, setBuildType] = useState<string>(app ? (app.build?.type ?? "none") : "dockerfile");
  const p = app ? `edit-${app.id.slice(0, 8)}` : "new";
  return (
    <Form
      label={app ? "Edit application" : "New application"}
      submit={submit}
      onSubmit={async (f) => {
        const body = bodyOf(f, servers);
        await onSave(app ? changed(body, app) : body);
      }}
    >
      <div class="grid">
        <label>
          Name
          <input name="name" required maxLength={128} value={app?.name} autoComplete="off" />
        </label>
        <label>
          Server
          <select name="server_id" required value={app?.server_id}>
            {servers.map((s) => (
              <option key={s.id} value={s.id}>
                {s.name}
              </option>
            ))}
          </select>
        </label>
        <label>
          Container name
          <input
            name="linked_container_name"
            required
            pattern="[a-zA-Z0-9][a-zA-Z0-9_.\-]*"
            maxLength={255}
            value={app?.linked_container_name}
            autoComplete="off"
          />
        </label>
        <label>
          Container port
          <input
            name="container_port"
            type="number"
            min={1}
            max={65535}
            required
            value={app?.container_port ?? 8080}
          />
        </label>
      </div>
      <label>
        Domains (one per line)
        <textarea name="fqdns" rows={2} value={app?.fqdns.join("\n")} />
      </label>
      <fieldset>
        <legend>Source and build</legend>
        <div class="grid">
          <label>
            Git repository URL
            <input
              name="git_repository"
              value={app?.git_repository ?? ""}
              placeholder="https://git.example.com/org/app.git"
            />
          </label>
          <label>
            Deploy branch
            <input name="deploy_branch" value={app?.deploy_branch ?? ""} placeholder="main" />
          </label>
          <label>
            Build
            <select name="build_type" value={buildType} onChange={(e) => setBuildType(e.currentTarget.value)}>
              <option value="dockerfile">Dockerfile in the repository</option>
              <option value="image">Pull an image</option>
              <option value="none">None (external deploy only)</option>
            </select>
          </label>
          {buildType === "dockerfile" && (
            <>
              <label>
                Dockerfile
                <input name="dockerfile" value={app?.build?.dockerfile ?? "Dockerfile"} />
              </label>
              <label>
                Build context
                <input name="context" value={app?.build?.context ?? "."} />
              </label>
            </>
          )}
          {buildType === "image" && (
            <label>
              Image
              <input
                name="image"
                required
                value={app?.build?.image ?? ""}
                placeholder="registry.example.com/app:1.0"
              />
            </label>
          )}
        </div>
      </fieldset>
      <fieldset>
        <legend>Health check</legend>
        <div class="grid">
          <label>
            Path
            <input name="health_check_path" value={app?.health_check_path ?? "/"} />
          </label>
          <label>
            Timeout (seconds)
            <input
              name="health_check_timeout_seconds"
              type="number"
              min={1}
              max={600}
              value={app?.health_check_timeout_seconds ?? 30}
            />
          </label>
        </div>
      </fieldset>
      <label class="check" for={`${p}-auto`}>
        <input id={`${p}-auto`} name="auto_deploy" type="checkbox" checked={app?.auto_deploy ?? false} />
        Deploy automatically on a push to the deploy branch
      </label>
    </Form>
  );
}
