// exec and restart through the Automation API. exec passes the remote command's
// stdout and stderr to the matching streams as they come (the API's event
// stream: whole lines, as the agent relays them) and exits with its exit code,
// like ssh; a command still running at --timeout exits 124 naming its operation.
// --json waits for the whole answer instead.
import type { Command } from "commander";
import { application, collect, ctxOf, serverId } from "../context.js";
import type { Api } from "../client.js";
import { CliError, EXIT, usageError } from "../errors.js";
import { sseEvents } from "../sse.js";
import { emit, printFields } from "../output.js";

/** `NAME=value`, or `NAME` alone to pass this shell's value (kept off the command line). */
function envOf(entries: string[]): Record<string, string> | undefined {
  if (!entries.length) return undefined;
  const env: Record<string, string> = {};
  for (const e of entries) {
    const i = e.indexOf("=");
    const name = i < 0 ? e : e.slice(0, i);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw usageError(`--env ${name}: not a variable name`);
    const value = i < 0 ? process.env[name] : e.slice(i + 1);
    if (value === undefined) throw usageError(`--env ${name}: not set in this shell`);
    env[name] = value;
  }
  return env;
}

interface ExecAnswer {
  operation_id: string;
  status: string;
  exit_code?: number;
  stdout?: string;
  stderr?: string;
  duration_ms?: number;
}

export function registerExec(program: Command): void {
  program
    .command("exec <server> <command...>")
    .description("run a shell command on a server; its output and exit code are passed through")
    .option("--timeout <seconds>", "how long to wait for the command (1-900, default 60)", Number)
    .option(
      "--env <NAME[=value]>",
      "an environment variable (repeat); NAME alone passes this shell's value",
      collect,
      [],
    )
    .option("--cwd <dir>", "working directory on the server")
    .option("--run-id <id>", "group this operation with others of one run")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl exec web-1 -- uptime\n  relayctl exec web-1 --timeout 300 --env TOKEN -- ./migrate.sh\n  relayctl exec web-1 --json -- df -h",
    )
    .action(async (server: string, words: string[], o: Record<string, unknown>, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const body = {
        server_id: await serverId(api, server),
        command: words.join(" "),
        ...(o.timeout !== undefined ? { timeout_seconds: o.timeout } : {}),
        ...(o.cwd ? { working_directory: o.cwd } : {}),
        ...(o.runId ? { run_id: o.runId } : {}),
        ...(envOf(o.env as string[]) ? { env: envOf(o.env as string[]) } : {}),
      };
      const r = json
        ? await api.call<ExecAnswer>("POST", "/api/automation/v1/exec", "automation", body)
        : await streamed(api, body);
      if (json) printJsonAnswer(r);
      if (r.status === "running") {
        throw new CliError(
          `still running after the timeout: follow it with 'relayctl ops get ${r.operation_id}'`,
          EXIT.timeout,
        );
      }
      // A streamed answer's output is printed already; a plain one (an older server) now.
      if (!json) {
        process.stdout.write(r.stdout ?? "");
        process.stderr.write(r.stderr ?? "");
      }
      // Only a command that ran to its end has an exit code of its own to pass on.
      if (r.status !== "completed" || typeof r.exit_code !== "number" || r.exit_code < 0) {
        // A command that never started has only its reason as stderr, without a newline.
        if (!json && r.stderr && !r.stderr.endsWith("\n")) process.stderr.write("\n");
        throw new CliError(`exec ${r.status}: see 'relayctl ops get ${r.operation_id}'`, EXIT.failed);
      }
      process.exitCode = r.exit_code;
    });

  program
    .command("restart <app-or-server> [container]")
    .description(
      "restart an application's live container (by application name or id), or a container on a server",
    )
    .option("--run-id <id>", "group this operation with others of one run")
    .addHelpText("after", "\nExamples:\n  relayctl restart shop\n  relayctl restart web-1 shop-web")
    .action(async (first: string, container: string | undefined, o: { runId?: string }, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      // One argument is an application: the API resolves its linked_container_name to its live container.
      const target =
        container === undefined
          ? await application(api, first).then((a) => ({
              server_id: String(a.server_id),
              container_name: String(a.linked_container_name),
            }))
          : { server_id: await serverId(api, first), container_name: container };
      const r = await api.call<ExecAnswer>("POST", "/api/automation/v1/restart", "automation", {
        ...target,
        ...(o.runId ? { run_id: o.runId } : {}),
      });
      emit(json, r, () =>
        printFields(r as unknown as Record<string, unknown>, [
          "operation_id",
          "status",
          "exit_code",
          "stderr",
        ]),
      );
      if (r.status === "running")
        throw new CliError(
          `still running after 60 s: follow it with 'relayctl ops get ${r.operation_id}'`,
          EXIT.timeout,
        );
      // Anything but a restart that completed with 0 (engine error, failed, timeout) is a failure.
      if (r.status !== "completed" || r.exit_code !== 0) {
        const why = (r.stderr ?? "").trim().split("\n").at(-1);
        throw new CliError(
          `restart ${r.status}${r.exit_code !== undefined ? ` (exit ${r.exit_code})` : ""}${why ? `: ${why}` : ""}`,
          EXIT.failed,
        );
      }
    });
}

/**
 * POST /exec asking for its event stream: each line is printed as it arrives, and
 * the answer returned has no output left to print (except a reason it did not run).
 * A server that answers JSON instead is answered as before.
 */
async function streamed(api: Api, body: Record<string, unknown>): Promise<ExecAnswer> {
  const res = await api.raw("POST", "/api/automation/v1/exec", "automation", body, "text/event-stream");
  if (!(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    const text = await res.text();
    return text ? (JSON.parse(text) as ExecAnswer) : ({} as ExecAnswer);
  }
  let operationId = "";
  for await (const e of sseEvents(res.body!)) {
    const data = JSON.parse(e.data) as Record<string, unknown>;
    if (e.event === "started") operationId = String(data.operation_id);
    else if (e.event === "output")
      (data.stream === "stderr" ? process.stderr : process.stdout).write(`${data.text}\n`);
    else if (e.event === "end") {
      if (data.output_complete === false)
        process.stderr.write(
          `relayctl: some output was lost on the way; 'relayctl ops get ${operationId}' has all of it\n`,
        );
      const { output_complete: _, ...answer } = data;
      return answer as unknown as ExecAnswer;
    }
  }
  throw new CliError(
    `the stream of operation ${operationId || "(not started)"} ended early: see 'relayctl ops get ${operationId}'`,
    EXIT.server,
  );
}

function printJsonAnswer(r: ExecAnswer): void {
  const { _status, ...rest } = r as ExecAnswer & { _status?: number };
  process.stdout.write(`${JSON.stringify(rest, null, 2)}\n`);
}
