// Registry credentials: add one (the password is write-only: sealed, never shown
// again), list them, remove one after a confirmation.
import { type RegistryCredential, del, get, post } from "../api";
import { useWho } from "../session";
import { Table } from "../table";
import { ConfirmButton, Empty, Form, Page, Resource, Time, field, useLoad } from "../ui";

export function RegistryPage() {
  const owner = useWho().may("POST /api/registry-credentials");
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
            <Table
              label="Registry credentials"
              rows={list}
              rowKey={(c) => c.id}
              columns={[
                { head: "Name", cell: (c) => c.name },
                { head: "Registry", class: "mono", cell: (c) => c.registry_url },
                { head: "Type", cell: (c) => c.registry_type },
                { head: "User", cell: (c) => c.username },
                { head: "Added", cell: (c) => <Time iso={c.created_at} /> },
                {
                  head: "Actions",
                  hideHead: true,
                  cell: (c) =>
                    owner && (
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
                    ),
                },
              ]}
            />
          )
        }
      </Resource>
    </Page>
  );
}
