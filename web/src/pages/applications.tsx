// Applications: the organization's applications, each with its state, what is live,
// its last deployment and where it is served; and a form to create one.
import { useState } from "preact/hooks";
import { type Application, type Server, get, post } from "../api";
import { navigate } from "../router";
import { useWho } from "../session";
import { Table } from "../table";
import { AppUrl, Badge, Empty, Page, Resource, Time, useLoad } from "../ui";
import { AppForm } from "./app-form";
import { STATE_BADGE } from "./app-live";

/** Its container's state as the agent reports it, else whether anything was ever live. */
function Status({ a }: { a: Application }) {
  if (a.container)
    return (
      <span class={`badge ${STATE_BADGE[a.container.state]}`}>{a.container.state.replace("_", " ")}</span>
    );
  return a.live_release ? (
    <Badge status="live" />
  ) : (
    <span class="badge badge-off">not{"\u00a0"}deployed</span>
  );
}

function LiveCommit({ a }: { a: Application }) {
  const live = a.live_release;
  if (!live) return <>—</>;
  return (
    <>
      <span class="mono">{live.commit_sha?.slice(0, 10) ?? live.image ?? "—"}</span>
      {live.commit_message ? <span class="hint"> {live.commit_message}</span> : null}
    </>
  );
}

function LastDeploy({ a }: { a: Application }) {
  const d = a.last_deployment;
  if (!d) return <>never</>;
  return (
    <>
      <Badge status={d.status} />{" "}
      <a href={`/app/applications/${a.id}/deployments/${d.deployment_id}`}>
        <Time iso={d.created_at} />
      </a>
    </>
  );
}

export function ApplicationsPage() {
  const [creating, setCreating] = useState(false);
  const mayCreate = useWho().may("POST /api/applications");
  // Polled: a deployment's outcome and a container's state show up without a reload.
  const apps = useLoad(() => get<{ applications: Application[] }>("/api/applications"), [], 10_000);
  const servers = useLoad(() => get<{ servers: Server[] }>("/api/servers"), []);
  return (
    <Page
      title="Applications"
      actions={
        !creating &&
        mayCreate && (
          <button type="button" class="primary" onClick={() => setCreating(true)}>
            New application
          </button>
        )
      }
    >
      {creating && (
        <section class="card" aria-labelledby="new-app-title">
          <h2 id="new-app-title">New application</h2>
          <Resource r={servers} what="servers">
            {({ servers: list }) =>
              list.length === 0 ? (
                <p>
                  An application runs on a server: <a href="/app/servers">add a server</a> first.
                </p>
              ) : (
                <AppForm
                  servers={list}
                  submit="Create application"
                  onSave={async (body) => {
                    const app = await post<Application>("/api/applications", body);
                    navigate(`/app/applications/${app.id}`);
                  }}
                />
              )
            }
          </Resource>
          <button type="button" onClick={() => setCreating(false)}>
            Cancel
          </button>
        </section>
      )}
      <Resource r={apps} what="applications">
        {({ applications }) =>
          applications.length === 0 ? (
            <Empty>
              <p>No applications yet.</p>
              <p>Choose New application to say where its code lives and which server runs it.</p>
            </Empty>
          ) : (
            <Table
              label="Applications"
              rows={applications}
              rowKey={(a) => a.id}
              columns={[
                { head: "Name", cell: (a) => <a href={`/app/applications/${a.id}`}>{a.name}</a> },
                { head: "Status", cell: (a) => <Status a={a} /> },
                { head: "Live commit", cell: (a) => <LiveCommit a={a} /> },
                { head: "Last deploy", cell: (a) => <LastDeploy a={a} /> },
                { head: "URL", cell: (a) => <AppUrl url={a.url} /> },
                {
                  head: "Server",
                  cell: (a) => <a href={`/app/servers/${a.server_id}`}>{a.server_name ?? "its server"}</a>,
                },
              ]}
            />
          )
        }
      </Resource>
    </Page>
  );
}
