// servers: the tenant's servers and their agents.
import type { Command } from "commander";
import { ctxOf } from "../context.js";
import { emit, printTable } from "../output.js";

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

export function registerServers(program: Command): void {
  const servers = program
    .command("servers")
    .description("the servers of your organization")
    .addHelpText("after", "\nExamples:\n  relayctl servers\n  relayctl servers list --json");
  servers
    .command("list", { isDefault: true })
    .description(
      "list servers with their agent version, container engine, reverse proxy and when they were last seen",
    )
    .addHelpText("after", "\nExample:\n  relayctl servers list --json")
    .action(async (_o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const r = await api.call<{ servers: Record<string, unknown>[] }>("GET", "/api/servers", "dashboard");
      emit(json, r, () => {
        const rows = r.servers.map((s) => ({
          ...s,
          engine: engineCell(s.engine as Engine | null),
          proxy: proxyCell(s.proxy as Proxy | null),
        }));
        printTable(rows, [
          ["ID", "id"],
          ["NAME", "name"],
          ["HOSTNAME", "hostname"],
          ["AGENT", "agent_version"],
          ["LAST SEEN", "last_seen_at"],
          ["ENGINE", "engine"],
          ["PROXY", "proxy"],
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
}
