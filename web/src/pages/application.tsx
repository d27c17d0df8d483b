// One application: its live release, deploy (optional ref), its releases with a
// rollback button on each kept one, the deployment history, environment
// variables (write-only: names and when they were set), its settings, deletion.
import { useState } from "preact/hooks";
import {
  type AppContainer,
  type Application,
  type Deployment,
  type Release,
  type Server,
  del,
  get,
  patch,
  post,
} from "../api";
import { navigate } from "../router";
import { useWho } from "../session";
import { Table } from "../table";
import {
  AppUrl,
  Badge,
  ConfirmButton,
  Empty,
  Form,
  Page,
  Resource,
  Time,
  duration,
  field,
  useLoad,
  ShowMore,
  usePageSize,
} from "../ui";
import { AppForm } from "./app-form";
import { Logs } from "./app-logs";
import { GitHubRepository } from "./github";

/** The application routes as the control plane declares them (what `who.may` is asked about). */
const APP_ROUTE = "/api/tenants/:tenant_id/applications/:application_id";

export const appBase = (tenantId: string, appId: string) =>
  `/api/tenants/${encodeURIComponent(tenantId)}/applications/${encodeURIComponent(appId)}`;

function DeployForm({ app }: { app: Application }) {
  const who = useWho();
  return (
    <Form
      label="Deploy"
      submit="Deploy"
      onSubmit={async (f) => {
        const ref = field(f, "commit_ref");
        const started = await post<{ deployment_id: string }>(
          `${appBase(who.tenantId, app.id)}/deploy`,
          ref ? { commit_ref: ref } : {},
        );
        navigate(`/app/applications/${app.id}/deployments/${started.deployment_id}`);
      }}
    >
      <label>
        Branch, tag or commit (optional)
        <input name="commit_ref" placeholder={app.deploy_branch} autoComplete="off" />
      </label>
    </Form>
  );
}

function History({ app }: { app: Application }) {
  const who = useWho();
  const size = usePageSize(20, 100);
  const list = useLoad(
    () =>
      get<{ deployments: Deployment[]; next_cursor: string | null }>(
        `${appBase(who.tenantId, app.id)}/deployments?limit=${size.get()}`,
      ),
    [app.id],
    5000,
  );
  return (
    <>
      <Resource r={list} what="deployments">
        {({ deployments }) =>
          deployments.length === 0 ? (
            <Empty>
              <p>Not deployed yet. Choose Deploy above to run the first deployment.</p>
            </Empty>
          ) : (
            <Table
              label="Deployments"
              rows={deployments}
              rowKey={(d) => d.deployment_id}
              columns={[
                {
                  head: "Started",
                  cell: (d) => (
                    <a href={`/app/applications/${app.id}/deployments/${d.deployment_id}`}>
                      <Time iso={d.created_at} />
                    </a>
                  ),
                },
                { head: "Status", cell: (d) => <Badge status={d.status} /> },
                { head: "Duration", cell: (d) => duration(d.duration_ms) },
                {
                  head: "Commit",
                  class: "mono",
                  cell: (d) => (
                    <>
                      {d.commit_sha?.slice(0, 10) ?? d.commit_ref ?? "—"} {d.commit_message ?? ""}
                    </>
                  ),
                },
                { head: "Trigger", cell: (d) => d.trigger },
                { head: "By", cell: (d) => d.triggered_by?.name ?? d.triggered_by?.type ?? "—" },
              ]}
            />
          )
        }
      </Resource>
      <ShowMore
        what="deployments"
        hasMore={Boolean(list.data?.next_cursor) && !size.atMax()}
        onMore={() => size.grow(list.reload)}
      />
    </>
  );
}

/** The releases, newest (live) first; each kept one but the live one can be rolled back to. */
function Releases({ app }: { app: Application }) {
  const who = useWho();
  const base = appBase(who.tenantId, app.id);
  const list = useLoad(() => get<{ releases: Release[] }>(`${base}/releases`), [app.id], 5000);
  return (
    <Resource r={list} what="releases">
      {({ releases }) =>
        releases.length === 0 ? (
          <Empty>
            <p>No release yet: a deployment that goes live is a release.</p>
          </Empty>
        ) : (
          <Table
            label="Releases"
            rows={releases}
            rowKey={(r) => r.deployment_id}
            columns={[
              {
                head: "Since",
                cell: (r) => (
                  <a href={`/app/applications/${app.id}/deployments/${r.deployment_id}`}>
                    <Time iso={r.since} />
                  </a>
                ),
              },
              {
                head: "Commit",
                class: "mono",
                cell: (r) => (
                  <>
                    {r.commit_sha?.slice(0, 10) ?? "—"} {r.commit_message ?? ""}
                    {r.rollback_of ? <span class="hint"> (rollback)</span> : null}
                  </>
                ),
              },
              { head: "Image", class: "mono", cell: (r) => r.image ?? "—" },
              { head: "By", cell: (r) => r.triggered_by.name ?? r.triggered_by.type },
              {
                head: "",
                cell: (r) =>
                  r.live ? (
                    <Badge status="live" />
                  ) : r.image_kept && who.may(`POST ${APP_ROUTE}/rollback`) ? (
                    <ConfirmButton
                      label="Roll back"
                      title={`Roll back to ${r.deployment_id}`}
                      question={`Start release ${r.deployment_id} (commit ${r.commit_sha?.slice(0, 10) ?? "?"}) again? Its image and configuration are started beside the live one, health-checked, and traffic switches to it; nothing is built.`}
                      confirm="Roll back"
                      danger={false}
                      action={async () => {
                        const started = await post<{ deployment_id: string }>(`${base}/rollback`, {
                          release: r.deployment_id,
                        });
                        navigate(`/app/applications/${app.id}/deployments/${started.deployment_id}`);
                      }}
                    />
                  ) : r.image_kept ? null : (
                    <span class="hint">image pruned</span>
                  ),
              },
            ]}
          />
        )
      }
    </Resource>
  );
}

interface EnvVar {
  name: string;
  updated_at: string;
}

function Env({ app }: { app: Application }) {
  const who = useWho();
  const base = `${appBase(who.tenantId, app.id)}/env`;
  const vars = useLoad(() => get<{ variables: EnvVar[] }>(base), [app.id]);
  return (
    <>
      <p class="hint">
        Values are write-only: relayctl seals them and never shows them again. Set a name again to replace its
        value.
      </p>
      <Resource r={vars} what="environment variables">
        {({ variables }) =>
          variables.length === 0 ? (
            <Empty>
              <p>No environment variables. Add one below; it reaches the container at the next deployment.</p>
            </Empty>
          ) : (
            <ul class="list" aria-label="Environment variables">
              {variables.map((v) => (
                <li key={v.name}>
                  <span class="mono">{v.name}</span>
                  <span class="hint">
                    set <Time iso={v.updated_at} />
                  </span>
                  {who.may(`DELETE ${APP_ROUTE}/env/:name`) && (
                    <ConfirmButton
                      label="Remove"
                      title={`Remove ${v.name}`}
                      question={`Remove the variable ${v.name}? The next deployment runs without it.`}
                      confirm="Remove variable"
                      action={async () => {
                        await del(`${base}/${encodeURIComponent(v.name)}`);
                        vars.reload();
                      }}
                    />
                  )}
                </li>
              ))}
            </ul>
          )
        }
      </Resource>
      {who.may(`POST ${APP_ROUTE}/env`) && (
        <Form
          label="Set an environment variable"
          submit="Set variable"
          onSubmit={async (f) => {
            const value = (f.elements.namedItem("value") as HTMLInputElement).value;
            await post(base, { variables: { [field(f, "name")]: value } });
            // The value leaves the page with the request: nothing keeps it.
            f.reset();
            vars.reload();
          }}
        >
          <div class="grid">
            <label>
              Name
              <input
                name="name"
                required
                pattern="[A-Za-z_][A-Za-z0-9_]*"
                autoComplete="off"
                spellcheck={false}
              />
            </label>
            <label>
              Value
              <input name="value" type="password" required autoComplete="new-password" />
            </label>
          </div>
        </Form>
      )}
    </>
  );
}

function Settings({ app, onSaved }: { app: Application; onSaved: () => void }) {
  const servers = useLoad(() => get<{ servers: Server[] }>("/api/servers"), []);
  const [saved, setSaved] = useState(false);
  return (
    <Resource r={servers} what="servers">
      {({ servers: list }) => (
        <>
          <AppForm
            app={app}
            servers={list}
            submit="Save changes"
            onSave={async (body) => {
              if (Object.keys(body).length > 0) await patch(`/api/applications/${app.id}`, body);
              setSaved(true);
              onSaved();
            }}
          />
          <output class="hint">{saved ? "Saved." : ""}</output>
        </>
      )}
    </Resource>
  );
}

/** The badge colours of the operation statuses that mean the same (a running app is good news). */
const STATE_BADGE: Record<AppContainer["state"], string> = {
  running: "badge-succeeded",
  restarting: "badge-queued",
  stopped: "badge-off",
  crashed: "badge-failed",
  crash_loop: "badge-failed",
};

/** The agent's report of the app's container: state, last exit, restarts, last crash. */
function ContainerState({ c }: { c: AppContainer | null }) {
  if (c === null) return <>not reported (not deployed yet)</>;
  return (
    <>
      <span class={`badge ${STATE_BADGE[c.state]}`}>{c.state.replace("_", " ")}</span>
      {c.exit_code !== null && c.state !== "running" ? ` exit code ${c.exit_code}` : ""}
      {c.since ? (
        <>
          {" "}
          since <Time iso={c.since} />
        </>
      ) : null}
      {`, ${c.restart_count} restart${c.restart_count === 1 ? "" : "s"}`}
      {c.last_crash_at ? (
        <>
          , last crash <Time iso={c.last_crash_at} />
        </>
      ) : null}
      <span class="hint mono"> {c.name}</span>
    </>
  );
}

export function ApplicationPage({ id }: { id: string }) {
  const who = useWho();
  const app = useLoad(() => get<Application>(`/api/applications/${encodeURIComponent(id)}`), [id]);
  return (
    <Page title={app.data?.name ?? "Application"}>
      <p>
        <a href="/app/applications">← All applications</a>
      </p>
      <Resource r={app} what="the application">
        {(a) => (
          <>
            <dl class="facts">
              <dt>Server</dt>
              <dd>{a.server_name ?? a.server_id}</dd>
              <dt>URL</dt>
              <dd data-testid="application-url">
                {a.urls.length === 0 ? (
                  "none (no domain and no RELAYCTL_APPS_URL)"
                ) : (
                  <ul class="plain">
                    {a.urls.map((u) => (
                      <li key={u}>
                        <AppUrl url={u} />
                      </li>
                    ))}
                  </ul>
                )}
              </dd>
              <dt>Domains</dt>
              <dd>{a.fqdns.join(", ") || "none"}</dd>
              <dt>Source</dt>
              <dd class="mono">
                {a.git_repository ? `${a.git_repository} @ ${a.deploy_branch}` : (a.build?.image ?? "none")}
              </dd>
              <dt>Container</dt>
              <dd class="mono">
                {a.linked_container_name}:{a.container_port}
              </dd>
              <dt>Running</dt>
              <dd data-testid="application-container">
                <ContainerState c={a.container ?? null} />
              </dd>
              <dt>Live release</dt>
              <dd data-testid="application-live-release">
                {a.live_release ? (
                  <>
                    <span class="mono">
                      {a.live_release.commit_sha?.slice(0, 10) ?? a.live_release.image}
                    </span>{" "}
                    {a.live_release.commit_message ?? ""} since <Time iso={a.live_release.since} />
                    {a.live_release.rollback_of ? <span class="hint"> (a rollback)</span> : null}
                  </>
                ) : (
                  "none yet"
                )}
              </dd>
            </dl>
            {who.may(`POST ${APP_ROUTE}/deploy`) && (
              <section aria-labelledby="deploy-h" class="card">
                <h2 id="deploy-h">Deploy</h2>
                <DeployForm app={a} />
              </section>
            )}
            <section aria-labelledby="releases-h">
              <h2 id="releases-h">Releases</h2>
              <Releases app={a} />
            </section>
            <section aria-labelledby="history-h">
              <h2 id="history-h">Deployments</h2>
              <History app={a} />
            </section>
            {who.may("GET /api/applications/:id/logs") && <Logs appId={a.id} />}
            <section aria-labelledby="env-h" class="card">
              <h2 id="env-h">Environment variables</h2>
              <Env app={a} />
            </section>
            {who.may(`PUT ${APP_ROUTE}/github-repository`) && (
              <details class="card">
                <summary>
                  <h2>GitHub repository</h2>
                </summary>
                <GitHubRepository appId={a.id} />
              </details>
            )}
            {who.may("PATCH /api/applications/:id") && (
              <details class="card">
                <summary>
                  <h2>Settings</h2>
                </summary>
                <Settings app={a} onSaved={app.reload} />
              </details>
            )}
            {who.may("DELETE /api/applications/:id") && (
              <section aria-labelledby="danger-h">
                <h2 id="danger-h">Delete</h2>
                <ConfirmButton
                  label="Delete application"
                  question={`Delete ${a.name}? Its route is removed from the server's proxy, and its containers and images from the server, at once (or when its agent next connects).`}
                  confirm="Delete application"
                  action={async () => {
                    await del(`/api/applications/${a.id}`);
                    navigate("/app/applications");
                  }}
                />
              </section>
            )}
          </>
        )}
      </Resource>
    </Page>
  );
}
