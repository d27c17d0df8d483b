// servers: the tenant's servers and their agents.
import type { Command } from "commander";
import { ctxOf } from "../context.js";
import { emit, printTable } from "../output.js";

export function registerServers(program: Command): void {
  const servers = program
    .command("servers")
    .description("the servers of your organization")
    .addHelpText("after", "\nExamples:\n  relayctl servers\n  relayctl servers list --json");
  servers
    .command("list", { isDefault: true })
    .description("list servers with their agent version and when they were last seen")
    .addHelpText("after", "\nExample:\n  relayctl servers list --json")
    .action(async (_o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const r = await api.call<{ servers: Record<string, unknown>[] }>("GET", "/api/servers", "dashboard");
      emit(json, r, () =>
        printTable(r.servers, [
          ["ID", "id"],
          ["NAME", "name"],
          ["HOSTNAME", "hostname"],
          ["AGENT", "agent_version"],
          ["LAST SEEN", "last_seen_at"],
        ]),
      );
    });
}
