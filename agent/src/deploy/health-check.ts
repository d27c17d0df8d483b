// The health check step: GET http://127.0.0.1:<host port><path> until a 2xx or
// 3xx, within health_check_timeout_seconds (and the job's deadline). A
// container that exits fails at once, with the tail of its logs (scrubbed by the
// recorder) in the step log. The answer is read as curl reads it: Node's
// strict parser refuses LF-only status and header lines ("Missing expected CR
// after response line") and a status line without a reason phrase, which small
// servers send and curl accepts (issue 29); only the status code is used.
import { request } from "node:http";
import { setTimeout as delay } from "node:timers/promises";
import { type ContainerFacts, parseInspect } from "../engine/container-facts.js";
import { type DeployContext, StepError, callOptions, outputOf } from "./context.js";

const REQUEST_TIMEOUT_MS = 2_000;
/**
 * The wait between probes: 25 ms after the first, doubling up to 200 ms. Most applications
 * answer within the first few hundred ms of their start; a fixed 200 ms made a deploy wait up to
 * 200 ms past its application's first answer (measured: 1 deploy in 5 spent 222 ms in the step
 * against 7-10 ms for the others), and a refused loopback connection costs well under a ms.
 */
const FIRST_INTERVAL_MS = 25;
const INTERVAL_MS = 200;

/** The wait before the next probe, given the last one (none before the second probe). */
export function nextProbeWait(last?: number): number {
  return last === undefined ? FIRST_INTERVAL_MS : Math.min(last * 2, INTERVAL_MS);
}

/** The engine is asked whether the container still runs at most this often. */
const STATE_EVERY_MS = 1_000;
const LOG_TAIL_LINES = 30;

function get(port: number, path: string, signal: AbortSignal): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path,
        method: "GET",
        agent: false,
        // Lenient parsing of one loopback answer whose body is discarded: no request smuggling to fear.
        insecureHTTPParser: true,
        signal,
        headers: { connection: "close" },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.setTimeout(REQUEST_TIMEOUT_MS, () =>
      req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)),
    );
    req.on("error", reject);
    req.end();
  });
}

export async function healthCheck(ctx: DeployContext, name: string, hostPort: number): Promise<void> {
  const { job, rec, signal } = ctx;
  const path = job.healthCheckPath.startsWith("/") ? job.healthCheckPath : `/${job.healthCheckPath}`;
  // Printable ASCII only: anything else could not be sent as a request line anyway.
  if (!/^\/[\x21-\x7e]*$/.test(path))
    throw new StepError(`invalid health check path '${path.slice(0, 200)}'`);
  const timeoutMs = (job.healthCheckTimeoutSeconds || 30) * 1000;
  const until = Date.now() + timeoutMs;
  rec.log("health_check", `GET http://127.0.0.1:${hostPort}${path}, up to ${timeoutMs / 1000} s`);
  let last = "no answer yet";
  let stateAt = 0;
  let wait: number | undefined;
  // The engine's answer on whether the container still runs is asked beside the probes, not
  // between them: on a loaded machine an inspect can take seconds, and a probe loop that waited
  // for it would spend the application's whole timeout unasked (a healthy app failed).
  let asking: Promise<void> | undefined;
  let stopped: Stopped | undefined;
  const fail = (why: Stopped) => {
    rec.log("health_check", why.log);
    return new StepError(why.reason);
  };
  const askState = () => {
    stateAt = Date.now();
    asking = whyStopped(ctx, name).then(
      (why) => {
        asking = undefined;
        if (why !== undefined) stopped ??= why;
      },
      () => {
        asking = undefined; // the engine did not answer: the probes go on
      },
    );
  };
  while (!signal.aborted) {
    if (stopped) throw fail(stopped);
    try {
      const status = await get(hostPort, path, signal);
      if (status >= 200 && status < 400) {
        rec.log("health_check", `answered ${status}`);
        return;
      }
      last = `answered ${status}`;
    } catch (err) {
      last = (err as Error).message;
    }
    if (asking === undefined && Date.now() - stateAt >= STATE_EVERY_MS) askState();
    if (Date.now() >= until) {
      // A container that stopped is the better reason: the engine's answer under way is waited for.
      await asking;
      if (stopped) throw fail(stopped);
      throw new StepError(`no 2xx or 3xx answer from ${path} within ${timeoutMs / 1000} s (last: ${last})`);
    }
    wait = nextProbeWait(wait);
    await delay(wait, undefined, { signal }).catch(() => undefined);
  }
}

/**
 * "exited with code 3": podman's "stopped" (the process ended, its cleanup not yet run: a
 * loaded machine shows it for a while) reads as the exit it is; other states as they are.
 */
export function stoppedHow(facts: ContainerFacts): string {
  if (facts.status !== "exited" && facts.status !== "stopped") return facts.status;
  return facts.exitCode === undefined ? "exited" : `exited with code ${facts.exitCode}`;
}

interface Stopped {
  reason: string;
  /** For the step's log: how it stopped and the end of its log. */
  log: string;
}

/** Why the container no longer runs, or undefined while it runs. */
async function whyStopped(ctx: DeployContext, name: string): Promise<Stopped | undefined> {
  const o = await ctx.engine.inspect([name], callOptions(ctx).deadlineSeconds);
  const facts = parseInspect(o.stdout).get(name);
  // Docker brings a crashed app back at once (--restart unless-stopped, start-step.ts): a
  // restart before the first answer is the app exiting, as much as an exited state is. On
  // podman nothing restarts it before its switch (deploy/in-flight.ts): it stays exited.
  const restarts = facts?.restartCount ?? 0;
  if (facts === undefined || (facts.running && restarts === 0)) return undefined;
  const how = restarts > 0 ? `exited; restarted ${restarts}x by the engine` : stoppedHow(facts);
  const logs = await ctx.engine.logsTail(name, LOG_TAIL_LINES, callOptions(ctx));
  return {
    reason: `the container stopped (${how}) before it answered`,
    log: `the container stopped (${how}); the end of its log:\n${outputOf(logs)}`,
  };
}
