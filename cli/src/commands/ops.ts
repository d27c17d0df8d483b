// ops: read operations (one by id, or the operations of one run).
import type { Command } from "commander";
import { ctxOf } from "../context.js";
import { usageError } from "../errors.js";
import { emit, printFields, printTable } from "../output.js";

export function registerOps(program: Command): void {
  const ops = program
    .command("ops")
    .description("operations: exec, deploy, restart, reboot, registry login/logout")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl ops get 3f2c...e1\n  relayctl ops list --run-id gh-12345 --json",
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
    .description("the operations of one run (newest first)")
    .option("--run-id <id>", "the run id the operations were started with (required)")
    .option("--cursor <cursor>", "next_cursor of the previous page")
    .addHelpText("after", "\nExample:\n  relayctl ops list --run-id gh-12345")
    .action(async (o: { runId?: string; cursor?: string }, cmd: Command) => {
      if (!o.runId) throw usageError("ops list: --run-id is required");
      const { api, json } = ctxOf(cmd);
      const q = new URLSearchParams({ run_id: o.runId, ...(o.cursor ? { cursor: o.cursor } : {}) });
      const r = await api.call<{ operations: Record<string, unknown>[]; next_cursor: string | null }>(
        "GET",
        `/api/automation/v1/operations?${q}`,
        "automation",
      );
      emit(json, r, () => {
        printTable(
          r.operations.map((op) => ({
            ...op,
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
