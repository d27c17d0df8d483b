// audit: the tenant's audit trail, newest first (the dashboard's audit log), with
// its filters and who acted on every row. --oldest-first reads it in chain order.
import type { Command } from "commander";
import { application, ctxOf, serverId } from "../context.js";
import { emit, printTable } from "../output.js";

interface AuditEvent {
  seq: number;
  created_at: string;
  event_type: string;
  operation_id: string | null;
  run_id: string | null;
  payload: Record<string, unknown> | null;
  actor?: { type: string; id: string | null; name: string };
  outcome?: { status: string; exit_code: number | null };
}

/** The actor's name; the payload's for an older control plane without `actor`. */
function actorName(e: AuditEvent): string | undefined {
  if (e.actor) return e.actor.name;
  const a = e.payload?.actor as { email?: string; key_name?: string } | undefined;
  return a?.email ?? a?.key_name;
}

/** How an operation ended: "exit 0", "exit 1", or its status. */
function outcomeOf(e: AuditEvent): string | undefined {
  if (!e.outcome) return undefined;
  if (e.outcome.status === "completed" && e.outcome.exit_code !== null) return `exit ${e.outcome.exit_code}`;
  return e.outcome.status;
}

export function registerAudit(program: Command): void {
  program
    .command("audit")
    .description("read the audit trail (newest first), with who acted")
    .option("--type <types>", "event types or families, comma-separated (auth, operation.exec, api_key...)")
    .option("--actor <id>", "only what this person (user id) or key (key id) did")
    .option("--server <server>", "only this server (name or id)")
    .option("--app <app>", "only this application (name or id)")
    .option("--run-id <id>", "only this run")
    .option("--operation <id>", "only this operation")
    .option("--since <iso>", "only events since this date or time")
    .option("--until <iso>", "only events until this date (the whole day) or time")
    .option("--oldest-first", "in chain order, oldest first")
    .option("--limit <n>", "events per page (1-1000, default 100)")
    .option("--cursor <cursor>", "next_cursor of the previous page")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl audit\n  relayctl audit --type auth,api_key --since 2026-11-01\n  relayctl audit --app shop --type operation.deploy\n  relayctl audit --run-id gh-12345 --oldest-first --json",
    )
    .action(async (o: Record<string, string | boolean | undefined>, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const q = new URLSearchParams();
      const map: Record<string, string> = {
        type: "event_type",
        actor: "actor",
        runId: "run_id",
        operation: "operation_id",
        since: "since",
        until: "until",
        limit: "limit",
        cursor: "cursor",
      };
      for (const [opt, param] of Object.entries(map)) if (o[opt]) q.set(param, String(o[opt]));
      if (o.server) q.set("server_id", await serverId(api, String(o.server)));
      if (o.app) q.set("application_id", (await application(api, String(o.app))).id);
      if (!o.oldestFirst) q.set("order", "desc");
      const r = await api.call<{ events: AuditEvent[]; next_cursor: string | null }>(
        "GET",
        `/api/audit?${q}`,
        "dashboard",
      );
      emit(json, r, () => {
        printTable(
          r.events.map((e) => ({ ...e, actor_name: actorName(e), outcome_text: outcomeOf(e) })),
          [
            ["SEQ", "seq"],
            ["TIME", "created_at"],
            ["EVENT", "event_type"],
            ["ACTOR", "actor_name"],
            ["OUTCOME", "outcome_text"],
            ["OPERATION", "operation_id"],
            ["RUN", "run_id"],
          ],
        );
        if (r.next_cursor)
          process.stderr.write(`more: --cursor ${r.next_cursor}${o.oldestFirst ? " --oldest-first" : ""}\n`);
      });
    });
}
