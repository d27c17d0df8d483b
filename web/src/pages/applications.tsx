// Applications: the organization's applications and a form to create one.
import { useState } from "preact/hooks";
import { type Application, type Server, get, post } from "../api";
import { navigate } from "../router";
import { useWho } from "../session";
import { Table } from "../table";
import { AppUrl, Empty, Page, Resource, useLoad } from "../ui";
import { AppForm } from "./app-form";

export function ApplicationsPage() {
  const [creating, setCreating] = useState(false);
  const mayCreate = useWho().may("POST /api/applications");
  const apps = useLoad(() => get<{ applications: Application[] }>("/api/applications"), []);
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
                { head: "Server", cell: (a) => a.server_name ?? a.server_id },
                { head: "URL", cell: (a) => <AppUrl url={a.url} /> },
                { head: "Domains", cell: (a) => a.fqdns.join(", ") || "—" },
                {
                  head: "Source",
                  class: "mono",
                  cell: (a) =>
                    a.git_repository ? `${a.git_repository} @ ${a.deploy_branch}` : (a.build?.image ?? "—"),
                },
              ]}
            />
          )
        }
      </Resource>
    </Page>
  );
}
