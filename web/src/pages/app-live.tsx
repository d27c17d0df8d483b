// What is live and where: the application's current release (commit, image, since when,
// the deployment that made it), its URLs as links, its server by name, its container's
// state, a deployment under way, and the two actions people reach for first: deploy
// that commit again, or roll back to the release before it.
import type { Application, AppContainer, Release } from "../api";
import { post } from "../api";
import { navigate } from "../router";
import { useWho } from "../session";
import { AppUrl, Badge, ConfirmButton, type Loaded, Time } from "../ui";
import { APP_ROUTE, appBase } from "./app-paths";
import { rolloutPath } from "./rollout";

/** The badge colours of the operation statuses that mean the same (a running app is good news). */
export const STATE_BADGE: Record<AppContainer["state"], string> = {
  running: "badge-succeeded",
  restarting: "badge-queued",
  stopped: "badge-off",
  crashed: "badge-failed",
  crash_loop: "badge-failed",
};

/** The agent's report of the app's container: state, last exit, restarts, last crash, a crash loop's hold. */
export function ContainerState({ c }: { c: AppContainer | null }) {
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
      {c.held_until ? (
        <>
          , held by the agent: started again <Time iso={c.held_until} />
        </>
      ) : null}
      <span class="hint mono"> {c.name}</span>
    </>
  );
}

const short = (sha: string | null | undefined) => sha?.slice(0, 10);
const deploymentPath = (appId: string, id: string) => `/app/applications/${appId}/deployments/${id}`;

/** The newest kept release older than the live one: what Roll back goes to. */
export function previousRelease(releases: Release[] | undefined): Release | undefined {
  const live = releases?.findIndex((r) => r.live) ?? -1;
  if (!releases || live < 0) return undefined;
  return releases.slice(live + 1).find((r) => r.image_kept);
}

function Actions({ app, live, previous }: { app: Application; live: Release; previous?: Release }) {
  const who = useWho();
  const base = appBase(who.tenantId, app.id);
  const start = async (path: string, body: Record<string, string>) => {
    const started = await post<{ deployment_id: string; rollout_id?: string }>(`${base}/${path}`, body);
    // A fleet's deploy or rollback is a rollout over its servers: its page shows them all.
    navigate(
      started.rollout_id
        ? rolloutPath(app.id, started.rollout_id)
        : deploymentPath(app.id, started.deployment_id),
    );
  };
  // A fleet rolls back as a whole, each server to the release before its own live one (no release named).
  const fleet = Boolean(app.placement);
  const commit = short(live.commit_sha);
  return (
    <div class="row">
      {who.may(`POST ${APP_ROUTE}/deploy`) && (
        <ConfirmButton
          label="Redeploy"
          title={commit ? `Redeploy commit ${commit}` : "Redeploy"}
          question={
            commit
              ? `Deploy commit ${commit} again? It is fetched and built again, started beside the live container, health-checked, and traffic switches to it.`
              : "Deploy again? The image is pulled again, started beside the live container, health-checked, and traffic switches to it."
          }
          confirm="Redeploy"
          danger={false}
          action={() => start("deploy", live.commit_sha ? { commit_ref: live.commit_sha } : {})}
        />
      )}
      {who.may(`POST ${APP_ROUTE}/rollback`) &&
        (previous ? (
          <ConfirmButton
            label="Roll back"
            title={`Roll back to ${short(previous.commit_sha) ?? previous.deployment_id}`}
            question={
              fleet
                ? "Roll back every server of this fleet to the release before its live one? Each one's earlier image and configuration are started again beside its live one, server by server as the rollout strategy says; nothing is built."
                : `Roll back to the release of ${short(previous.commit_sha) ?? "an earlier image"}${previous.commit_message ? ` (${previous.commit_message})` : ""}, first live ${new Date(previous.since).toLocaleString()}? Its image and configuration are started again beside the live one; nothing is built.`
            }
            confirm="Roll back"
            danger={false}
            action={() => start("rollback", fleet ? {} : { release: previous.deployment_id })}
          />
        ) : (
          <span class="hint">No earlier release is kept to roll back to.</span>
        ))}
    </div>
  );
}

export function LiveNow({
  app,
  releases,
}: {
  app: Application;
  releases: Loaded<{ releases: Release[] }>;
}) {
  const live = app.live_release ?? null;
  const last = app.last_deployment;
  const underWay = last && (last.status === "queued" || last.status === "running") ? last : null;
  const urls = live?.urls.length ? live.urls : app.urls;
  return (
    <section aria-labelledby="live-h" class="card">
      <h2 id="live-h">Live now</h2>
      <dl class="facts">
        <dt>Release</dt>
        <dd data-testid="application-live-release">
          {live ? (
            <>
              <a href={deploymentPath(app.id, live.deployment_id)} class="mono">
                {short(live.commit_sha) ?? live.image}
              </a>{" "}
              {live.commit_message ?? ""} since <Time iso={live.since} />
              {live.rollback_of ? <span class="hint"> (a rollback)</span> : null}
            </>
          ) : (
            "none yet: nothing has been deployed"
          )}
        </dd>
        {live?.image ? (
          <>
            <dt>Image</dt>
            <dd class="mono">{live.image}</dd>
          </>
        ) : null}
        <dt>URL</dt>
        <dd data-testid="application-url">
          {urls.length === 0 ? (
            "none (no domain and no RELAYCTL_APPS_URL)"
          ) : (
            <ul class="plain">
              {urls.map((u) => (
                <li key={u}>
                  <AppUrl url={u} />
                </li>
              ))}
            </ul>
          )}
        </dd>
        <dt>Server</dt>
        <dd data-testid="application-server">
          <a href={`/app/servers/${app.server_id}`}>{app.server_name ?? "its server"}</a>
        </dd>
        <dt>Container</dt>
        <dd data-testid="application-container">
          <ContainerState c={app.container ?? null} />
        </dd>
        {underWay ? (
          <>
            <dt>Deploying</dt>
            <dd data-testid="application-deploying">
              <Badge status={underWay.status} />{" "}
              <a href={deploymentPath(app.id, underWay.deployment_id)}>
                {short(underWay.commit_sha) ?? underWay.commit_ref ?? "follow it"}
              </a>
              , started <Time iso={underWay.created_at} />
            </dd>
          </>
        ) : null}
      </dl>
      {live ? <Actions app={app} live={live} previous={previousRelease(releases.data?.releases)} /> : null}
    </section>
  );
}
