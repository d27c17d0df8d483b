// Applications: the organization's applications and a form to create one.
import { useState } from "preact/hooks";
import { type Application, type Server, get, post } from "../api";
import { navigate } from "../router";
import { AppUrl, Empty, Page, Resource, useLoad, TableWrap } from "../ui";
import { AppForm } from "./app-form";

export function ApplicationsPage() {
  const [creating, setCreating] = useState(false);
  const apps = useLoad(() => get<{ applications: Application[] }>("/api/applications"), []);
  const servers = useLoad(() => get<{ servers: Server[] }>("/api/servers"), []);
  return (
    <Page
      title="Applications"
      actions={
        !creating && (
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
            <TableWrap label="Applications">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Server</th>
                    <th scope="col">URL</th>
                    <th scope="col">Domains</th>
                    <th scope="col">Source</th>
                  </tr>
                </thead>
                <tbody>
                  {applications.map((a) => (
                    <tr key={a.id}>
                      <th scope="row">
                        <a href={`/app/applications/${a.id}`}>{a.name}</a>
                      </th>
                      <td>{a.server_name ?? a.server_id}</td>
                      <td>
                        <AppUrl url={a.url} />
                      </td>
                      <td>{a.fqdns.join(", ") || "—"}</td>
                      <td class="mono">
                        {a.git_repository
                          ? `${a.git_repository} @ ${a.deploy_branch}`
                          : (a.build?.image ?? "—")}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          )
        }
      </Resource>
    </Page>
  );
}
