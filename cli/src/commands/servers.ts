// servers: the tenant's servers and their agents: list (connected now or not,
// the last heartbeat), show one (its applications and newest operations),
// label one (fleet placement, docs/fleets.md) and remove one (its agent is revoked).
import type { Command } from "commander";
import { ctxOf, serverId } from "../context.js";
import { usageError } from "../errors.js";
import { emit, printFields, printTable } from "../output.js";

/** GET /api/servers `engine`: null until the agent reports one. */
interface Engine {
  name: string | null;
  version: string | null;
  ok: boolean;
  detail: string;
}

/** The ENGINE cell: `podman 4.3.1`, `docker (not working)`, `none working`, or unknown. */
export function engineCell(e: Engine | null | undefined): string | null {
  if (!e) return null;
  if (e.ok) return [e.name, e.version].filter(Boolean).join(" ");
  return e.name ? `${e.name} (not working)` : "none working";
}

/** GET /api/servers `proxy`: null until the agent reports one. */
interface Proxy {
  kind: string;
  ok: boolean;
  detail: string;
}

/** The PROXY cell: `caddy`, `caddy (not answering)`, `none`, or unknown. */
export function proxyCell(p: Proxy | null | undefined): string | null {
  if (!p) return null;
  return p.ok ? p.kind : `${p.kind} (not answering)`;
}

/**
 * `k=v,k2=v2` for a labels object (sorted by key), `-` for none: one word, like
 * every other cell, so a table's columns split on spaces for scripts.
 */
export function labelsCell(labels: unknown): string {
  const l = (labels ?? {}) as Record<string, string>;
  return (
    Object.keys(l)
      .sort()
      .map((k) => `${k}=${l[k]}`)
      .join(",") || "-"
  );
}

/** `key=value` sets, `key-` removes; anything else is a usage error. */
export function applyLabelChanges(labels: Record<string, string>, changes: string[]): Record<string, string> {
  const out = { ...labels };
  for (const c of changes) {
    const i = c.indexOf("=");
    if (i > 0) out[c.slice(0, i)] = c.slice(i + 1);
    else if (c.endsWith("-") && c.length > 1) delete out[c.slice(0, -1)];
    else throw usageError(`'${c}': a label change is key=value (set) or key- (remove)`);
  }
  return out;
}

export function registerServers(program: Command): void {
  const servers = program
    .command("servers")
    .description("the servers of your organization")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl servers\n  relayctl servers list --json\n  relayctl servers show web-1\n  relayctl servers remove web-1",
    );
  servers
    .command("list", { isDefault: true })
    .description(
      "list servers: connected now or not, agent version, container engine, reverse proxy and the agent's last heartbeat",
    )
    .addHelpText("after", "\nExample:\n  relayctl servers list --json")
    .action(async (_o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const r = await api.call<{ servers: Record<string, unknown>[] }>("GET", "/api/servers", "dashboard");
      emit(json, r, () => {
        const rows = r.servers.map((s) => ({
          ...s,
          connected: s.connected ? "yes" : "no",
          engine: engineCell(s.engine as Engine | null),
          proxy: proxyCell(s.proxy as Proxy | null),
          labels: labelsCell(s.labels),
        }));
        printTable(rows, [
          ["ID", "id"],
          ["NAME", "name"],
          ["CONNECTED", "connected"],
          ["HOSTNAME", "hostname"],
          ["AGENT", "agent_version"],
          ["LAST SEEN", "last_seen_at"],
          ["ENGINE", "engine"],
          ["PROXY", "proxy"],
          ["LABELS", "labels"],
        ]);
        // A server that cannot deploy says why and how to fix it, under the table.
        for (const s of r.servers) {
          const e = s.engine as Engine | null;
          if (e && !e.ok) process.stdout.write(`\n${String(s.name)}: ${e.detail}\n`);
          const p = s.proxy as Proxy | null;
          if (p && !p.ok) process.stdout.write(`\n${String(s.name)}: ${p.detail}\n`);
        }
      });
    });
  servers
    .command("show <server>")
    .description("one server: its agent, engine, uptime, connection, applications and newest operations")
    .addHelpText("after", "\nExample:\n  relayctl servers show web-1")
    .action(async (server: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const id = await serverId(api, server);
      const s = await api.call<Record<string, unknown>>(
        "GET",
        `/api/servers/${encodeURIComponent(id)}`,
        "dashboard",
      );
      emit(json, s, () => {
        const apps = (s.applications as { name: string }[]) ?? [];
        printFields(
          {
            ...s,
            connected: s.connected ? "yes" : "no",
            engine: engineCell(s.engine as Engine | null),
            proxy: proxyCell(s.proxy as Proxy | null),
            applications: apps.map((a) => a.name),
            labels: labelsCell(s.labels),
          },
          [
            "id",
            "name",
            "connected",
            "connected_at",
            "last_seen_at",
            "booted_at",
            "hostname",
            "agent_version",
            "engine",
            "proxy",
            "labels",
            "applications",
          ],
        );
        const ops = (s.recent_operations as Record<string, unknown>[]) ?? [];
        if (ops.length === 0) return;
        process.stdout.write("\nRecent operations:\n");
        printTable(ops, [
          ["STARTED", "started_at"],
          ["TYPE", "operation_type"],
          ["STATUS", "status"],
          ["EXIT", "exit_code"],
          ["APPLICATION", "application_name"],
          ["ID", "operation_id"],
        ]);
      });
    });
  servers
    .command("label <server> <changes...>")
    .description("set (key=value) or remove (key-) a server's labels, which fleet placements select by")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl servers label web-1 region=eu role=web\n  relayctl servers label web-1 role-",
    )
    .action(async (server: string, changes: string[], _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const id = await serverId(api, server);
      const path = `/api/servers/${encodeURIComponent(id)}`;
      const now = await api.call<{ labels?: Record<string, string> }>("GET", path, "dashboard");
      const labels = applyLabelChanges(now.labels ?? {}, changes);
      const r = await api.call<{ labels: Record<string, string> }>("PUT", `${path}/labels`, "dashboard", {
        labels,
      });
      emit(json, r, () =>
        process.stdout.write(
          `${server}: ${Object.keys(r.labels ?? {}).length ? labelsCell(r.labels) : "(no labels)"}\n`,
        ),
      );
    });
  servers
    .command("remove <server>")
    .description(
      "remove a server: its agent's credential is revoked and its connection closed (refused while applications live on it)",
    )
    .addHelpText("after", "\nExample:\n  relayctl servers remove web-1")
    .action(async (server: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const id = await serverId(api, server);
      const r = await api.call<{ server_name: string }>(
        "DELETE",
        `/api/servers/${encodeURIComponent(id)}`,
        "dashboard",
      );
      emit(json, r, () =>
        process.stdout.write(
          `Removed ${r.server_name}: its agent can no longer connect (a new join token enrolls it again).\n`,
        ),
      );
    });
}
