// One server's page (issue 31, defect 7): its state (polled every 2 s, "unknown"
// while the control plane does not answer), agent version, container engine,
// reverse proxy, the machine's uptime, since when its agent is connected and its
// last heartbeat; its labels (owners edit them, server-labels.tsx); the
// applications placed on it and its newest operations; and, for owners, its
// removal, which revokes the agent (refused while applications live on it, and
// the dialog says so first).
import { del, get } from "../api";
import { type ServerPageData, serverPath } from "../api-servers";
import { navigate } from "../router";
import { useWho } from "../session";
import { Table } from "../table";
import { ConfirmButton, Empty, Page, Resource, Time, useLoad, when } from "../ui";
import { OutcomeBadge } from "./activity";
import { LabelChips, LabelsEditor } from "./server-labels";
import { ConnectedBadge, UnreachableBanner, useUnreachableSince } from "./server-state";
import { Engine, POLL_MS, ReverseProxy } from "./servers";

const MINUTE = 60_000;

/** "3 days 4 h", "5 h 12 min", "7 min": how long since `iso`. */
export function uptime(iso: string, now = Date.now()): string {
  const ms = Math.max(0, now - new Date(iso).getTime());
  const days = Math.floor(ms / (24 * 60 * MINUTE));
  const hours = Math.floor(ms / (60 * MINUTE)) % 24;
  const minutes = Math.floor(ms / MINUTE) % 60;
  if (days > 0) return `${days} day${days === 1 ? "" : "s"} ${hours} h`;
  if (hours > 0) return `${hours} h ${minutes} min`;
  return `${minutes} min`;
}

function Facts({ s, unknown }: { s: ServerPageData; unknown: boolean }) {
  return (
    <dl class="facts" aria-label="Server">
      <dt>State</dt>
      <dd>
        <ConnectedBadge connected={s.connected} unknown={unknown} />
      </dd>
      <dt>Host name</dt>
      <dd>{s.hostname ?? "—"}</dd>
      <dt>Agent version</dt>
      <dd>{s.agent_version ?? "—"}</dd>
      <dt>Container engine</dt>
      <dd>
        <Engine engine={s.engine} />
      </dd>
      <dt>Reverse proxy</dt>
      <dd>
        <ReverseProxy proxy={s.proxy} />
      </dd>
      <dt>Uptime</dt>
      <dd data-testid="uptime">
        {s.booted_at ? (
          <span title={`booted ${when(s.booted_at)}`}>
            {uptime(s.booted_at)}
            {s.connected && !unknown ? "" : " (as its agent last said)"}
          </span>
        ) : (
          "—"
        )}
      </dd>
      <dt>{s.connected ? "Connected since" : "Last connected"}</dt>
      <dd data-testid="connected-since">
        <Time iso={s.connected_at} />
      </dd>
      <dt>Last heartbeat</dt>
      <dd data-testid="last-heartbeat">
        <Time iso={s.last_seen_at} />
      </dd>
      <dt>Added</dt>
      <dd>
        <Time iso={s.created_at} />
      </dd>
      <dt>ID</dt>
      <dd class="mono">{s.id}</dd>
    </dl>
  );
}

function Operations({ s }: { s: ServerPageData }) {
  if (s.recent_operations.length === 0) return <Empty>No operation has run on this server yet.</Empty>;
  return (
    <Table
      label="Recent operations"
      caption={`The ${s.recent_operations.length} newest operations on ${s.name}, newest first`}
      rows={s.recent_operations}
      rowKey={(o) => o.operation_id}
      rowAttrs={(o) => ({ "data-operation-id": o.operation_id })}
      columns={[
        { head: "Started", cell: (o) => <Time iso={o.started_at} /> },
        { head: "Type", cell: (o) => o.operation_type },
        { head: "Status", cell: (o) => <OutcomeBadge status={o.status} exitCode={o.exit_code} /> },
        {
          head: "Application",
          cell: (o) =>
            o.application_id && o.deployment_id ? (
              <a href={`/app/applications/${o.application_id}/deployments/${o.deployment_id}`}>
                {o.application_name ?? "deployment"}
              </a>
            ) : (
              "—"
            ),
        },
        { head: "Run", class: "mono", cell: (o) => o.run_id ?? "—" },
      ]}
    />
  );
}

function Removal({ s }: { s: ServerPageData }) {
  const apps = s.applications.map((a) => a.name).join(", ");
  const question =
    s.applications.length > 0
      ? `${s.name} still has applications (${apps}). Removal is refused until they are deleted or moved to another server: removing it would leave their containers running with no agent to manage them.`
      : `Remove ${s.name}? Its agent's credential is revoked at once and its connection closed; the agent cannot connect again until the server is enrolled anew with a join token. Its operations stay in the history.`;
  return (
    <section aria-labelledby="remove-h">
      <h2 id="remove-h">Remove</h2>
      <p class="hint">
        Removing a server revokes its agent. The agent keeps running on the machine but can no longer connect;
        uninstall it there with <span class="mono">install.sh --uninstall</span>.
      </p>
      <ConfirmButton
        label="Remove server"
        question={question}
        confirm="Remove server"
        action={async () => {
          await del(`/api/servers/${s.id}`);
          navigate("/app/servers");
        }}
      />
    </section>
  );
}

export function ServerPage({ id }: { id: string }) {
  const who = useWho();
  const server = useLoad(() => get<ServerPageData>(`/api/servers/${encodeURIComponent(id)}`), [id], POLL_MS);
  const unreachable = useUnreachableSince(server);
  return (
    <Page title={server.data ? `Server ${server.data.name}` : "Server"}>
      <p>
        <a href="/app/servers">All servers</a>
      </p>
      <UnreachableBanner since={unreachable} error={server.error} />
      <Resource r={unreachable ? { ...server, error: undefined } : server} what="the server">
        {(s) => (
          <div class="server-page" data-server-path={serverPath(s.id)}>
            <Facts s={s} unknown={unreachable !== undefined} />
            <section aria-labelledby="labels-h">
              <h2 id="labels-h">Labels</h2>
              {who.may("PUT /api/servers/:server_id/labels") ? (
                <LabelsEditor serverId={s.id} labels={s.labels ?? {}} onSaved={server.reload} />
              ) : (
                <LabelChips labels={s.labels} none="No labels." />
              )}
            </section>
            <section aria-labelledby="apps-h">
              <h2 id="apps-h">Applications</h2>
              {s.applications.length === 0 ? (
                <Empty>No application is placed on this server.</Empty>
              ) : (
                <ul data-testid="server-applications">
                  {s.applications.map((a) => (
                    <li key={a.id}>
                      <a href={`/app/applications/${a.id}`}>{a.name}</a>
                    </li>
                  ))}
                </ul>
              )}
            </section>
            <section aria-labelledby="ops-h">
              <h2 id="ops-h">Recent operations</h2>
              <Operations s={s} />
              <p class="hint">
                All of them: <a href="/app/activity">Activity</a>.
              </p>
            </section>
            {who.may("DELETE /api/servers/:server_id") && <Removal s={s} />}
          </div>
        )}
      </Resource>
    </Page>
  );
}
