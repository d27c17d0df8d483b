// logs: the live container's output of an application (GET
// /api/applications/{id}/logs): the last --tail lines, or with -f the lines as
// they come until Ctrl-C or the server ends the follow. stdout lines go to
// stdout and stderr lines to stderr, as the application printed them; every
// value of the application's env is scrubbed (`***`) by the server.
import { UUID } from "@relayctl/reverse-proxy-sync/uuid";
import type { Command } from "commander";
import type { Api } from "../client.js";
import { application, ctxOf } from "../context.js";
import { CliError, EXIT, usageError } from "../errors.js";
import { printJson } from "../output.js";
import { sseEvents } from "../sse.js";

interface Line {
  stream: "stdout" | "stderr";
  text: string;
}

interface Options {
  follow?: boolean;
  tail?: string;
  since?: string;
}

const print = (l: Line) => (l.stream === "stderr" ? process.stderr : process.stdout).write(`${l.text}\n`);

/** An id as it is (an automation key cannot list applications), else the application of that name. */
async function applicationId(api: Api, nameOrId: string): Promise<string> {
  if (UUID.test(nameOrId.toLowerCase())) return nameOrId.toLowerCase();
  return (await application(api, nameOrId)).id;
}

function queryOf(o: Options): string {
  const q = new URLSearchParams();
  if (o.tail !== undefined) {
    if (!/^\d+$/.test(o.tail)) throw usageError("--tail: a number of lines, 1 to 10000");
    q.set("tail", o.tail);
  }
  if (o.since !== undefined) q.set("since", o.since);
  if (o.follow) q.set("follow", "true");
  const s = q.toString();
  return s ? `?${s}` : "";
}

/** Prints the lines as they come; ends at the server's `end` (exit 1 when the read failed) or Ctrl-C. */
async function follow(api: Api, path: string, json: boolean): Promise<void> {
  // Ctrl-C: exiting closes the connection, which ends the read on the server (and its child on the agent).
  process.once("SIGINT", () => process.exit(EXIT.ok));
  const res = await api.raw("GET", path, "dashboard", undefined, "text/event-stream");
  if (!res.body) throw new CliError("the log stream ended at once", EXIT.server);
  for await (const e of sseEvents(res.body)) {
    if (e.event === "log") {
      const l = JSON.parse(e.data) as Line;
      if (json) process.stdout.write(`${e.data}\n`);
      else print(l);
    } else if (e.event === "end") {
      const end = JSON.parse(e.data) as { reason: string; detail: string };
      if (json) process.stdout.write(`${JSON.stringify({ end: end.reason, detail: end.detail })}\n`);
      else process.stderr.write(`relayctl: logs ended: ${end.detail || end.reason}\n`);
      if (end.reason === "failed") throw new CliError(end.detail, EXIT.failed);
      return;
    }
  }
}

export function registerLogs(program: Command): void {
  program
    .command("logs <app>")
    .description("print an application's container output (the live release), or follow it with -f")
    .option("-f, --follow", "keep printing new lines as they come, until Ctrl-C")
    .option("--tail <n>", "lines from the end of the log (default 200, at most 10000)")
    .option("--since <time>", "only lines since then: an RFC 3339 time or a duration such as 10m")
    .addHelpText("after", "\nExamples:\n  relayctl logs shop --tail 50\n  relayctl logs shop -f --since 10m")
    .action(async (app: string, o: Options, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const path = `/api/applications/${await applicationId(api, app)}/logs${queryOf(o)}`;
      if (o.follow) return follow(api, path, json);
      const r = await api.call<{ lines: Line[]; truncated: boolean; end: string; detail: string }>(
        "GET",
        path,
        "dashboard",
      );
      if (json) return printJson(r);
      for (const l of r.lines) print(l);
      if (r.truncated)
        process.stderr.write("relayctl: older lines left out (the answer is capped at 4 MiB)\n");
      if (r.end === "failed") throw new CliError(`reading the logs failed: ${r.detail}`, EXIT.failed);
    });
}
