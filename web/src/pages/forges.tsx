// Git hosts (issue 32): the organization's GitLab, Gitea and Forgejo connections. An owner
// adds one (its API token write-only) and is shown the webhook URL and secret to paste into
// the project's webhook settings, the secret only this once; each connection's recent
// deliveries say what a push or merge request did; a connection is removed after a
// confirmation (refused while applications are linked). ForgeRepository is an
// application's link to a project on one of them.
import { useState } from "preact/hooks";
import { del, get, post, put } from "../api";
import { useWho } from "../session";
import { Table } from "../table";
import { Badge, ConfirmButton, Empty, Form, Page, Resource, SecretOnce, Time, field, useLoad } from "../ui";

export interface Forge {
  id: string;
  kind: "gitlab" | "gitea" | "forgejo";
  name: string;
  base_url: string;
  webhook_url: string;
  created_by: string;
  created_at: string;
}

interface Delivery {
  delivery_id: string;
  event: string;
  action: string | null;
  status: string;
  outcome: { result: string; detail: string } | null;
  received_at: string;
}

const KINDS = { gitlab: "GitLab", gitea: "Gitea", forgejo: "Forgejo" } as const;

/** Where the webhook goes in each forge's settings, and which events it sends. */
const HOOK_HELP = {
  gitlab:
    "In the project (or group): Settings → Webhooks. URL and Secret token as below; triggers Push events and Merge request events.",
  gitea:
    "In the repository: Settings → Webhooks → Add webhook → Gitea. Target URL and Secret as below, content type application/json; events Push and Pull Request.",
  forgejo:
    "In the repository: Settings → Webhooks → Add webhook → Forgejo. Target URL and Secret as below, content type application/json; events Push and Pull Request.",
};

function Added({ made }: { made: Forge & { webhook_secret: string; warning?: string } }) {
  return (
    <section class="card" aria-labelledby="forge-added" data-testid="forge-added">
      <h2 id="forge-added">{made.name} is connected: add its webhook</h2>
      <p class="hint">{HOOK_HELP[made.kind]}</p>
      <p>
        Webhook URL: <span class="mono">{made.webhook_url}</span>
      </p>
      <SecretOnce
        label="Webhook secret"
        value={made.webhook_secret}
        note="Shown only this once: copy it into the webhook settings now; it cannot be read back."
      />
      {made.warning && <p class="hint">{made.warning}</p>}
    </section>
  );
}

function Deliveries({ forge }: { forge: Forge }) {
  const list = useLoad(
    () => get<{ deliveries: Delivery[] }>(`/api/forges/${encodeURIComponent(forge.id)}/deliveries?limit=10`),
    [forge.id],
  );
  return (
    <Resource r={list} what="deliveries">
      {({ deliveries }) =>
        deliveries.length === 0 ? (
          <p class="hint">No webhook deliveries yet.</p>
        ) : (
          <ul class="list" aria-label={`Deliveries of ${forge.name}`}>
            {deliveries.map((d) => (
              <li key={d.delivery_id}>
                <span>
                  {d.event}
                  {d.action ? ` (${d.action})` : ""}
                </span>
                <Badge status={d.status} />
                <span class="hint">
                  {d.outcome ? `${d.outcome.result}: ${d.outcome.detail}` : "not processed yet"} ·{" "}
                  <Time iso={d.received_at} />
                </span>
              </li>
            ))}
          </ul>
        )
      }
    </Resource>
  );
}

export function ForgesPage() {
  const owner = useWho().may("POST /api/forges");
  const forges = useLoad(() => get<{ forges: Forge[] }>("/api/forges"), []);
  const [made, setMade] = useState<Forge & { webhook_secret: string; warning?: string }>();
  return (
    <Page title="Git hosts">
      <p class="hint">
        GitLab, Gitea and Forgejo: a push to a linked project deploys its application, a merge or pull request
        opens a preview, and each commit gets its status back. (GitHub has its own page, through the GitHub
        App.)
      </p>
      {made && <Added made={made} />}
      {owner && (
        <section class="card" aria-labelledby="new-forge">
          <h2 id="new-forge">Connect a Git host</h2>
          <Form
            label="Connect a Git host"
            submit="Connect"
            onSubmit={async (f) => {
              const apiToken = (f.elements.namedItem("api_token") as HTMLInputElement).value;
              const answer = await post<Forge & { webhook_secret: string; warning?: string }>("/api/forges", {
                kind: field(f, "kind"),
                name: field(f, "name"),
                base_url: field(f, "base_url"),
                api_token: apiToken,
              });
              // The token leaves the page with the request: nothing keeps it.
              f.reset();
              setMade(answer);
              forges.reload();
            }}
          >
            <div class="grid">
              <label>
                Kind
                <select name="kind">
                  {Object.entries(KINDS).map(([k, label]) => (
                    <option key={k} value={k}>
                      {label}
                    </option>
                  ))}
                </select>
              </label>
              <label>
                Name
                <input
                  name="name"
                  required
                  maxLength={128}
                  pattern="[A-Za-z0-9][A-Za-z0-9._\-]*"
                  autoComplete="off"
                />
              </label>
              <label>
                Address
                <input name="base_url" required placeholder="https://gitlab.example.com" autoComplete="off" />
              </label>
              <label>
                API token (commit statuses; sealed, never shown again)
                <input name="api_token" type="password" required autoComplete="new-password" />
              </label>
            </div>
          </Form>
        </section>
      )}
      <Resource r={forges} what="Git hosts">
        {({ forges: list }) =>
          list.length === 0 ? (
            <Empty>
              <p>No Git hosts connected.{owner ? " Connect one above." : ""}</p>
            </Empty>
          ) : (
            <>
              <Table
                label="Git hosts"
                rows={list}
                rowKey={(f) => f.id}
                rowAttrs={(f) => ({ "data-forge": f.name })}
                columns={[
                  { head: "Name", cell: (f) => f.name },
                  { head: "Kind", cell: (f) => KINDS[f.kind] ?? f.kind },
                  { head: "Address", class: "mono", cell: (f) => f.base_url },
                  { head: "Webhook URL", class: "mono", cell: (f) => f.webhook_url },
                  { head: "Added", cell: (f) => <Time iso={f.created_at} /> },
                  {
                    head: "Actions",
                    hideHead: true,
                    cell: (f) =>
                      owner && (
                        <ConfirmButton
                          label="Remove"
                          title={`Remove ${f.name}`}
                          question={`Remove the connection ${f.name}? Its webhooks are refused from then on. Unlink its applications first.`}
                          confirm="Remove connection"
                          action={async () => {
                            await del(`/api/forges/${encodeURIComponent(f.id)}`);
                            forges.reload();
                          }}
                        />
                      ),
                  },
                ]}
              />
              {list.map((f) => (
                <details key={f.id} class="card">
                  <summary>Recent deliveries of {f.name}</summary>
                  <Deliveries forge={f} />
                </details>
              ))}
            </>
          )
        }
      </Resource>
    </Page>
  );
}

interface Link {
  connection_id: string | null;
  project: string | null;
  clone_url?: string | null;
  deployable: boolean;
  reason?: string;
}

/** An application's project on a connected Git host: shown, linked, unlinked (owners). */
export function ForgeRepository({ appId }: { appId: string }) {
  const who = useWho();
  const base = `/api/applications/${encodeURIComponent(appId)}/forge-repository`;
  const link = useLoad(() => get<Link>(base), [appId]);
  const forges = useLoad(() => get<{ forges: Forge[] }>("/api/forges"), []);
  const owner = who.may("PUT /api/applications/:id/forge-repository");
  return (
    <Resource r={link} what="the Git host link">
      {(l) => (
        <>
          {l.connection_id ? (
            <p data-testid="forge-link">
              Linked to <span class="mono">{l.project}</span> on{" "}
              {forges.data?.forges.find((f) => f.id === l.connection_id)?.name ?? "a Git host"}: pushes to its
              deploy branch deploy it, merge requests open previews.
            </p>
          ) : (
            <p class="hint">Not linked to a project on a Git host.</p>
          )}
          {owner && l.connection_id && (
            <ConfirmButton
              label="Unlink"
              question="Unlink the project? Its pushes no longer deploy this application."
              confirm="Unlink"
              action={async () => {
                await del(base);
                link.reload();
              }}
            />
          )}
          {owner &&
            (forges.data?.forges.length ? (
              <Form
                label="Link a Git host project"
                submit={l.connection_id ? "Link another project" : "Link project"}
                onSubmit={async (f) => {
                  await put(base, { connection_id: field(f, "connection_id"), project: field(f, "project") });
                  link.reload();
                }}
              >
                <div class="grid">
                  <label>
                    Git host
                    <select name="connection_id">
                      {forges.data.forges.map((f) => (
                        <option key={f.id} value={f.id}>
                          {f.name} ({KINDS[f.kind] ?? f.kind})
                        </option>
                      ))}
                    </select>
                  </label>
                  <label>
                    Project
                    <input
                      name="project"
                      required
                      placeholder="group/app"
                      autoComplete="off"
                      spellcheck={false}
                    />
                  </label>
                </div>
              </Form>
            ) : (
              <p class="hint">
                Connect a Git host first on <a href="/app/forges">Git hosts</a>.
              </p>
            ))}
        </>
      )}
    </Resource>
  );
}
