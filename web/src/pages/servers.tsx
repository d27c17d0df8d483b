// Servers: each server's connected state (polled every 2 s; "unknown" while the control
// plane does not answer, server-state.tsx), agent version, container engine (with the
// reason and the fix when none works), reverse proxy (with why it does not answer) and
// its agent's last heartbeat; each name opens its page (server.tsx). "Add server"
// asks for a join token and shows the commands that enroll one.
import { useState } from "preact/hooks";
import { type ServerEngine, get, post } from "../api";
import { type ServerProxy, type ServerRow, serverPath } from "../api-servers";
import { useWho } from "../session";
import { Table } from "../table";
import { Empty, Form, Page, Resource, SecretOnce, Time, field, useLoad } from "../ui";
import { LabelChips } from "./server-labels";
import { ConnectedBadge, UnreachableBanner, useUnreachableSince } from "./server-state";

interface JoinToken {
  token: string;
  server_name?: string;
  expires_at: string;
  install_command: string;
  enroll_command: string;
}

export const POLL_MS = 2000;

function AddServer({ onClose }: { onClose: () => void }) {
  const [token, setToken] = useState<JoinToken>();
  if (token)
    return (
      <section class="card" aria-labelledby="add-server-title">
        <h2 id="add-server-title">Add a server</h2>
        <p>
          Run this on the server (it installs the agent and enrolls it). The token works once, until{" "}
          <time dateTime={token.expires_at}>{new Date(token.expires_at).toLocaleString()}</time>.
        </p>
        <SecretOnce
          label="Install command"
          value={token.install_command}
          note="Holds a single-use join token."
        />
        <p>If the agent is already installed there, enroll it instead:</p>
        <SecretOnce label="Enroll command" value={token.enroll_command} note="Holds the same join token." />
        <p class="hint">
          The server appears in the list below{token.server_name ? ` as ${token.server_name}` : ""} as soon as
          its agent connects.
        </p>
        <button type="button" onClick={onClose}>
          Done
        </button>
      </section>
    );
  return (
    <section class="card" aria-labelledby="add-server-title">
      <h2 id="add-server-title">Add a server</h2>
      <Form
        label="Add a server"
        submit="Create join token"
        onSubmit={async (f) => {
          const name = field(f, "name");
          setToken(await post<JoinToken>("/api/servers/join-tokens", name ? { name } : {}));
        }}
      >
        <label>
          Name (optional; the agent's host name otherwise)
          <input name="name" maxLength={128} autoComplete="off" />
        </label>
      </Form>
    </section>
  );
}

/** The engine the agent uses, or why deployments to it cannot run (the detail says how to fix it). */
export function Engine({ engine }: { engine: ServerEngine | null | undefined }) {
  if (!engine) return <>—</>;
  if (engine.ok)
    return <span title={engine.detail}>{[engine.name, engine.version].filter(Boolean).join(" ")}</span>;
  return (
    <>
      <span class="badge badge-failed">{engine.name ? `${engine.name} not working` : "no engine"}</span>
      <p class="hint">{engine.detail}</p>
    </>
  );
}

/** The proxy the agent writes routes to, or why deployments will fail at switch. */
export function ReverseProxy({ proxy }: { proxy: ServerProxy | null | undefined }) {
  if (!proxy) return <>—</>;
  if (proxy.ok) return <span title={proxy.detail}>{proxy.kind}</span>;
  return (
    <>
      <span class="badge badge-failed">{proxy.kind} not answering</span>
      <p class="hint">{proxy.detail}</p>
    </>
  );
}

export function ServersPage() {
  const who = useWho();
  const [adding, setAdding] = useState(false);
  const servers = useLoad(() => get<{ servers: ServerRow[] }>("/api/servers"), [], POLL_MS);
  const unreachable = useUnreachableSince(servers);
  return (
    <Page
      title="Servers"
      actions={
        who.may("POST /api/servers/join-tokens") &&
        !adding && (
          <button type="button" class="primary" onClick={() => setAdding(true)}>
            Add server
          </button>
        )
      }
    >
      {adding && <AddServer onClose={() => setAdding(false)} />}
      <UnreachableBanner since={unreachable} error={servers.error} />
      {/* Once a list is shown, a failed poll is told by the banner above, not a second alert. */}
      <Resource r={unreachable ? { ...servers, error: undefined } : servers} what="servers">
        {({ servers: list }) =>
          list.length === 0 ? (
            <Empty>
              <p>No servers yet.</p>
              <p>
                {who.may("POST /api/servers/join-tokens")
                  ? "Choose Add server: it shows the one command to run on your server."
                  : "Ask an owner of your organization to add one."}
              </p>
            </Empty>
          ) : (
            <Table
              label="Servers"
              caption="Servers, updated every 2 seconds"
              rows={list}
              rowKey={(s) => s.id}
              rowAttrs={(s) => ({ "data-server-id": s.id })}
              columns={[
                { head: "Name", cell: (s) => <a href={serverPath(s.id)}>{s.name}</a> },
                {
                  head: "State",
                  cell: (s) => <ConnectedBadge connected={s.connected} unknown={unreachable !== undefined} />,
                },
                { head: "Labels", cell: (s) => <LabelChips labels={s.labels} /> },
                { head: "Host name", cell: (s) => s.hostname ?? "—" },
                { head: "Agent", cell: (s) => s.agent_version ?? "—" },
                { head: "Container engine", cell: (s) => <Engine engine={s.engine} /> },
                { head: "Reverse proxy", cell: (s) => <ReverseProxy proxy={s.proxy} /> },
                { head: "Last heartbeat", cell: (s) => <Time iso={s.last_seen_at} /> },
              ]}
            />
          )
        }
      </Resource>
    </Page>
  );
}
