// Registry credentials: add one (the password is write-only: sealed, never shown
// again), list them, remove one after a confirmation.
import { type RegistryCredential, del, get, post } from "../api";
import { useWho } from "../session";
import { ConfirmButton, Empty, Form, Page, Resource, Time, field, useLoad, TableWrap } from "../ui";

export function RegistryPage() {
  const owner = useWho().role === "owner";
  const creds = useLoad(() => get<RegistryCredential[]>("/api/registry-credentials"), []);
  return (
    <Page title="Registry credentials">
      <p class="hint">
        Container registry logins that deployments and CI (through an automation key) use to pull images.
        Passwords are sealed and never shown again.
      </p>
      {owner && (
        <section class="card" aria-labelledby="new-cred">
          <h2 id="new-cred">Add a registry credential</h2>
          <Form
            label="Add a registry credential"
            submit="Add credential"
            onSubmit={async (f) => {
              const password = (f.elements.namedItem("password") as HTMLInputElement).value;
              await post("/api/registry-credentials", {
                name: field(f, "name"),
                registry_url: field(f, "registry_url"),
                username: field(f, "username"),
                password,
              });
              f.reset();
              creds.reload();
            }}
          >
            <div class="grid">
              <label>
                Name
                <input name="name" required maxLength={128} autoComplete="off" />
              </label>
              <label>
                Registry (empty: Docker Hub)
                <input name="registry_url" placeholder="ghcr.io" autoComplete="off" />
              </label>
              <label>
                User name
                <input name="username" required autoComplete="off" />
              </label>
              <label>
                Password or token
                <input name="password" type="password" required autoComplete="new-password" />
              </label>
            </div>
          </Form>
        </section>
      )}
      <Resource r={creds} what="registry credentials">
        {(list) =>
          list.length === 0 ? (
            <Empty>
              <p>No registry credentials. Add one to deploy images from a private registry.</p>
            </Empty>
          ) : (
            <TableWrap label="Registry credentials">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Registry</th>
                    <th scope="col">Type</th>
                    <th scope="col">User</th>
                    <th scope="col">Added</th>
                    <th scope="col">
                      <span class="sr-only">Actions</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {list.map((c) => (
                    <tr key={c.id}>
                      <th scope="row">{c.name}</th>
                      <td class="mono">{c.registry_url}</td>
                      <td>{c.registry_type}</td>
                      <td>{c.username}</td>
                      <td>
                        <Time iso={c.created_at} />
                      </td>
                      <td>
                        {owner && (
                          <ConfirmButton
                            label="Remove"
                            title={`Remove ${c.name}`}
                            question={`Remove the credential ${c.name}? Keys and applications using it can no longer log in with it.`}
                            confirm="Remove credential"
                            action={async () => {
                              await del(`/api/registry-credentials/${c.id}`);
                              creds.reload();
                            }}
                          />
                        )}
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
