// audit: the tenant's audit trail, oldest first, with its filters.
import type { Command } from "commander";
import { ctxOf } from "../context.js";
import { emit, printTable } from "../output.js";

export function registerAudit(program: Command): void {
  program
    .command("audit")
    .description("read the audit trail (oldest first)")
    .option("--run-id <id>", "only this run")
    .option("--operation <id>", "only this operation")
    .option("--server <id>", "only this server id")
    .option("--since <iso>", "only events since this time")
    .option("--limit <n>", "events per page (1-1000, default 100)")
    .option("--cursor <cursor>", "next_cursor of the previous page")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl audit --run-id gh-12345\n  relayctl audit --since 2026-11-01T00:00:00Z --json",
    )
    .action(async (o: Record<string, string | undefined>, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const q = new URLSearchParams();
      const map: Record<string, string> = {
        runId: "run_id",
        operation: "operation_id",
        server: "server_id",
        since: "since",
        limit: "limit",
        cursor: "cursor",
      };
      for (const [opt, param] of Object.entries(map)) if (o[opt]) q.set(param, String(o[opt]));
      const r = await api.call<{ events: Record<string, unknown>[]; next_cursor: string | null }>(
        "GET",
        `/api/audit${q.size ? `?${q}` : ""}`,
        "dashboard",
      );
      emit(json, r, () => {
        printTable(
          r.events.map((e) => {
            const actor = (e.payload as { actor?: { email?: string; key_name?: string } } | null)?.actor;
            return { ...e, actor: actor?.email ?? actor?.key_name };
          }),
          [
            ["SEQ", "seq"],
            ["TIME", "created_at"],
            ["EVENT", "event_type"],
            ["ACTOR", "actor"],
            ["OPERATION", "operation_id"],
            ["RUN", "run_id"],
          ],
        );
        if (r.next_cursor) process.stderr.write(`more: --cursor ${r.next_cursor}\n`);
      });
    });
}
