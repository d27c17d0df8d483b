// An application's past: its releases (newest, the live one, first; each kept one can be
// rolled back to) and its deployment history, whatever their outcome.
import { type Application, type Deployment, type Release, get, post } from "../api";
import { navigate } from "../router";
import { useWho } from "../session";
import { Table } from "../table";
import {
  Badge,
  ConfirmButton,
  Empty,
  type Loaded,
  Resource,
  ShowMore,
  Time,
  duration,
  useLoad,
  usePageSize,
} from "../ui";
import { APP_ROUTE, appBase } from "./app-paths";

/** The releases of an application (the page loads them once for its parts). */
export function useReleases(tenantId: string, appId: string) {
  return useLoad(() => get<{ releases: Release[] }>(`${appBase(tenantId, appId)}/releases`), [appId], 5000);
}

export function History({ app }: { app: Application }) {
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
export function Releases({ app, list }: { app: Application; list: Loaded<{ releases: Release[] }> }) {
  const who = useWho();
  const base = appBase(who.tenantId, app.id);
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
                  ) : r.image_kept && app.placement ? (
                    // A fleet's releases are per server: it rolls back as a whole (Roll back above).
                    <span class="hint">kept</span>
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
