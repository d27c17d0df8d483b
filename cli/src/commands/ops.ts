// ops: read operations: one by id, the recent ones of the organization (newest
// first, filtered), or the operations of one run (what an automation key may read).
import type { Command } from "commander";
import { ctxOf, isAutomationKey, serverId } from "../context.js";
import { usageError } from "../errors.js";
import { emit, printFields, printTable } from "../output.js";

export function registerOps(program: Command): void {
  const ops = program
    .command("ops")
    .description("operations: exec, deploy, restart, reboot, registry login/logout")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl ops list\n  relayctl ops get 3f2c...e1\n  relayctl ops list --run-id gh-12345 --json",
    );
  ops
    .command("get <operation_id>")
    .description("one operation with its whole output")
    .addHelpText("after", "\nExample:\n  relayctl ops get 3f2c...e1 --json")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const op = await api.call(
        "GET",
        `/api/automation/v1/operations/${encodeURIComponent(id)}`,
        "automation",
      );
      emit(json, op, () => {
        const { result, ...rest } = op as unknown as Record<string, unknown> & {
          result: Record<string, unknown> | null;
        };
        printFields({ ...rest, exit_code: result?.exit_code, duration_ms: result?.duration_ms });
        if (result?.stdout) process.stdout.write(`--- stdout\n${result.stdout}`);
        if (result?.stderr) process.stdout.write(`--- stderr\n${result.stderr}`);
      });
    });
  ops
    .command("list")
    .description("recent operations, newest first (all of them, or of one run, server, status or type)")
    .option("--run-id <id>", "only the operations started with this run id")
    .option("--server <server>", "only this server (name or id)")
    .option("--status <status>", "running, completed, failed or timeout")
    .option("--type <type>", "exec, deploy, restart, reboot, registry_login, registry_logout, route_sync")
    .option("--limit <n>", "operations per page (1-200, default 50)")
    .option("--cursor <cursor>", "next_cursor of the previous page")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl ops list\n  relayctl ops list --server web-1 --status failed\n  relayctl ops list --run-id gh-12345",
    )
    .action(async (o: Record<string, string | undefined>, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const automation = isAutomationKey(api);
      // An automation key reads only its own runs' operations (the Automation API); a
      // person or an API key reads the organization's recent ones.
      if (automation && !o.runId) throw usageError("ops list: --run-id is required");
      const q = new URLSearchParams();
      if (o.runId) q.set("run_id", o.runId);
      if (o.cursor) q.set("cursor", o.cursor);
      if (!automation) {
        if (o.server) q.set("server_id", await serverId(api, o.server));
        if (o.status) q.set("status", o.status);
        if (o.type) q.set("operation_type", o.type);
        if (o.limit) q.set("limit", o.limit);
      } else if (o.server || o.status || o.type || o.limit) {
        throw usageError("ops list: with an automation key only --run-id and --cursor apply");
      }
      const r = await api.call<{ operations: Record<string, unknown>[]; next_cursor: string | null }>(
        "GET",
        automation ? `/api/automation/v1/operations?${q}` : `/api/operations${q.size ? `?${q}` : ""}`,
        automation ? "automation" : "dashboard",
      );
      emit(json, r, () => {
        printTable(
          r.operations.map((op) => ({
            ...op,
            // A non-zero exit is still `completed` (the contract): EXIT says how it ended.
            exit_code: (op.result as { exit_code?: number } | null)?.exit_code,
          })),
          [
            ["ID", "operation_id"],
            ["TYPE", "operation_type"],
            ["SERVER", "server_name"],
            ["STATUS", "status"],
            ["EXIT", "exit_code"],
            ["STARTED", "started_at"],
          ],
        );
        if (r.next_cursor) process.stderr.write(`more: --cursor ${r.next_cursor}\n`);
      });
    });
}
