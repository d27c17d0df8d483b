// One application: what is live and where (app-live.tsx), deploy (optional ref), its
// releases with a rollback button on each kept one and the deployment history
// (app-releases.tsx), its logs, environment variables (write-only, app-env.tsx), its
// previews (app-previews.tsx; a preview's own page says what it previews), its settings,
// deletion. A fleet application's deploy opens its rollout, and its rollouts are listed
// (rollout.tsx).
import { useState } from "preact/hooks";
import { type Application, type Server, del, get, patch, post } from "../api";
import { navigate } from "../router";
import { useWho } from "../session";
import { ConfirmButton, Form, Page, Resource, field, useLoad } from "../ui";
import { AppForm } from "./app-form";
import { Env } from "./app-env";
import { LiveNow } from "./app-live";
import { PREVIEWS_ROUTE, PreviewOf, Previews } from "./app-previews";
import { Logs } from "./app-logs";
import { APP_ROUTE, appBase } from "./app-paths";
import { History, Releases, useReleases } from "./app-releases";
import { Rollouts, rolloutPath } from "./rollout";
import { ForgeRepository } from "./forges";
import { GitHubRepository } from "./github";

export { appBase } from "./app-paths";

function DeployForm({ app }: { app: Application }) {
  const who = useWho();
  return (
    <Form
      label="Deploy"
      submit="Deploy"
      onSubmit={async (f) => {
        const ref = field(f, "commit_ref");
        const started = await post<{ deployment_id: string; rollout_id?: string }>(
          `${appBase(who.tenantId, app.id)}/deploy`,
          ref ? { commit_ref: ref } : {},
        );
        // A fleet's deploy is a rollout over its servers: its page shows them all.
        if (started.rollout_id) navigate(rolloutPath(app.id, started.rollout_id));
        else navigate(`/app/applications/${app.id}/deployments/${started.deployment_id}`);
      }}
    >
      <label>
        Branch, tag or commit (optional)
        <input name="commit_ref" placeholder={app.deploy_branch} autoComplete="off" />
      </label>
    </Form>
  );
}

/**
 * The form starts from the application as last saved here (the PATCH answer): a
 * refused save keeps the person's edits, a saved one shows what the API stored
 * (domains lower-cased...), and the page's polls never overwrite a field being edited.
 */
function Settings({ app, onSaved }: { app: Application; onSaved: () => void }) {
  const servers = useLoad(() => get<{ servers: Server[] }>("/api/servers"), []);
  const [base, setBase] = useState(app);
  const [saved, setSaved] = useState(false);
  return (
    <Resource r={servers} what="servers">
      {({ servers: list }) => (
        <>
          <AppForm
            key={base.updated_at}
            app={base}
            servers={list}
            submit="Save changes"
            onSave={async (body) => {
              setSaved(false);
              if (Object.keys(body).length > 0)
                setBase(await patch<Application>(`/api/applications/${app.id}`, body));
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

export function ApplicationPage({ id }: { id: string }) {
  const who = useWho();
  // Polled: the container's state, what is live and a deployment under way stay current.
  const app = useLoad(() => get<Application>(`/api/applications/${encodeURIComponent(id)}`), [id], 5000);
  const releases = useReleases(who.tenantId, id);
  return (
    <Page title={app.data?.name ?? "Application"}>
      <p>
        <a href="/app/applications">← All applications</a>
      </p>
      <Resource r={app} what="the application">
        {(a) => (
          <>
            {a.preview_of && <PreviewOf app={a} />}
            <LiveNow app={a} releases={releases} />
            {who.may(`POST ${APP_ROUTE}/deploy`) && (
              <section aria-labelledby="deploy-h" class="card">
                <h2 id="deploy-h">Deploy</h2>
                <DeployForm app={a} />
              </section>
            )}
            <section aria-labelledby="releases-h">
              <h2 id="releases-h">Releases</h2>
              <Releases app={a} list={releases} />
            </section>
            {a.placement && (
              <section aria-labelledby="rollouts-h">
                <h2 id="rollouts-h">Rollouts</h2>
                <Rollouts app={a} />
              </section>
            )}
            <section aria-labelledby="history-h">
              <h2 id="history-h">Deployments</h2>
              <History app={a} />
            </section>
            {who.may("GET /api/applications/:id/logs") && <Logs appId={a.id} />}
            <section aria-labelledby="env-h" class="card">
              <h2 id="env-h">Environment variables</h2>
              <Env app={a} />
            </section>
            {!a.preview_of && who.may(`GET ${PREVIEWS_ROUTE}`) && (
              <section aria-labelledby="previews-h" class="card">
                <h2 id="previews-h">Previews</h2>
                <Previews app={a} onSaved={app.reload} />
              </section>
            )}
            {!a.preview_of && who.may(`PUT ${APP_ROUTE}/github-repository`) && (
              <details class="card">
                <summary>
                  <h2>GitHub repository</h2>
                </summary>
                <GitHubRepository appId={a.id} />
              </details>
            )}
            {!a.preview_of && who.may("PUT /api/applications/:id/forge-repository") && (
              <details class="card">
                <summary>
                  <h2>Git host project</h2>
                </summary>
                <ForgeRepository appId={a.id} />
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
