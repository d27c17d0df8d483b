// deploy: schedules a deployment (dashboard API) and, with --wait, follows its
// live log (text/event-stream: `progress` events of whole lines, `state` with
// the deployment's view when its status changes, then `end`) and exits non-zero
// when it failed or timed out; without --wait it prints how to follow it and
// its dashboard page. --follow <deployment> follows one already started (also
// a finished one: its steps and lines, then its exit code). rollback: the same
// for a rollback to a kept release (no build); releases: what can be rolled
// back to; deployments (deployments.ts): an application's recent deployments.
import type { Command } from "commander";
import type { Api } from "../client.js";
import { type AppRef, application, ctxOf, tenantId } from "../context.js";
import { CliError, EXIT, usageError } from "../errors.js";
import { emit, printFields, printTable } from "../output.js";
import { sseEvents } from "../sse.js";
import { findDeployment, registerDeployments } from "./deployments.js";
import { registerRollouts, reportRollout } from "./rollouts.js";

const FINISHED = new Set(["completed", "failed", "timeout"]);

/** Times a stream that closes before the outcome (an api restarting) is opened again. */
const RECONNECTS = 5;

/**
 * Follows the log until the deployment's outcome is known; returns its view.
 * Each step's state goes to stderr when it changes (`[build] running`), the
 * log's lines to stdout as they come (whole lines: the agent sends them so).
 * A stream that closes early is opened again, skipping what was printed.
 */
export async function followDeployment(
  api: Api,
  path: string,
  quiet: boolean,
): Promise<Record<string, unknown>> {
  const seen = { seq: Number.NEGATIVE_INFINITY, said: "" };
  for (let attempt = 0; ; attempt++) {
    const view = await followOnce(api, path, quiet, seen);
    if (view) return view;
    // The stream closed without the outcome: the view tells whether it is over.
    const now = await api.call("GET", path, "dashboard");
    if (FINISHED.has(String(now.status)) || attempt >= RECONNECTS) return now;
  }
}

async function followOnce(
  api: Api,
  path: string,
  quiet: boolean,
  seen: { seq: number; said: string },
): Promise<Record<string, unknown> | undefined> {
  const res = await api.raw("GET", `${path}/log`, "dashboard", undefined, "text/event-stream");
  if (!res.body) return undefined;
  for await (const e of sseEvents(res.body)) {
    if (e.event === "progress") {
      const p = JSON.parse(e.data) as { seq: number; step: string; status: string; log?: string };
      // A stream opened again replays from the start.
      if (p.seq <= seen.seq) continue;
      seen.seq = p.seq;
      if (quiet) continue;
      const state = `[${p.step}] ${p.status}`;
      if (state !== seen.said) {
        process.stderr.write(`${state}\n`);
        seen.said = state;
      }
      if (p.log) process.stdout.write(p.log.endsWith("\n") ? p.log : `${p.log}\n`);
    } else if (e.event === "state" || e.event === "end") {
      const view = JSON.parse(e.data) as Record<string, unknown>;
      // The outcome is known: what still runs (retire, in the background) is not waited for.
      if (e.event === "end" || FINISHED.has(String(view.status))) return view;
      if (!quiet && view.status === "queued")
        process.stderr.write(
          "queued: waiting for an earlier deployment of the application or for its agent\n",
        );
    }
  }
  return undefined;
}

export function registerDeploy(program: Command): void {
  program
    .command("deploy [app]")
    .description("deploy an application (by name or id), or follow a deployment with --follow")
    .option("--ref <ref>", "branch, tag or commit SHA (default: the application's deploy branch)")
    .option("--wait", "follow the deployment's progress and live log; exit non-zero unless it succeeds")
    .option("--timeout <seconds>", "the deployment's deadline (1-3600, server default 60)", Number)
    .option(
      "--follow <deployment>",
      "follow a deployment already started (its id) to its end instead; exit non-zero unless it succeeded",
    )
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl deploy shop\n  relayctl deploy shop --ref v1.4.2 --wait\n  relayctl deployments shop                 # recent deployments, with their ids\n  relayctl deploy shop --follow 3f1c2a4e-...\n  relayctl deploy --follow 3f1c2a4e-...     # the application is looked up",
    )
    .action(
      async (
        app: string | undefined,
        o: { ref?: string; wait?: boolean; timeout?: number; follow?: string },
        cmd: Command,
      ) => {
        if (app === undefined && o.follow === undefined)
          throw usageError("missing argument 'app' (or --follow <deployment>)");
        const { api, json } = ctxOf(cmd);
        if (o.follow !== undefined) {
          if (o.ref !== undefined || o.timeout !== undefined)
            throw usageError(
              "--follow follows a deployment already started: --ref and --timeout do not apply",
            );
          const tid = await tenantId(api);
          const a =
            app === undefined ? await findDeployment(api, tid, o.follow) : await application(api, app);
          const base = `/api/tenants/${tid}/applications/${a.id}`;
          if (!json) process.stderr.write(`Following deployment ${o.follow} of ${a.name}.\n`);
          await finish(api, json, `${base}/deployments/${encodeURIComponent(o.follow)}`);
          return;
        }
        const a = await application(api, app!);
        const tid = await tenantId(api);
        const base = `/api/tenants/${tid}/applications/${a.id}`;
        const started = await api.call<Started>("POST", `${base}/deploy`, "dashboard", {
          ...(o.ref ? { commit_ref: o.ref } : {}),
          ...(o.timeout ? { timeout_seconds: o.timeout } : {}),
        });
        await report(api, json, a, base, started, "Deployment", o.wait);
      },
    );

  program
    .command("rollback <app> [release]")
    .description(
      "start a kept release of an application again, with no build (default: the release before the live one)",
    )
    .option("--wait", "follow the rollback's progress; exit non-zero unless it succeeds")
    .option("--timeout <seconds>", "the rollback's deadline (1-3600, server default 60)", Number)
    .addHelpText(
      "after",
      "\nA release is a deployment that went live; `relayctl releases <app>` lists them and which are kept.\nExamples:\n  relayctl rollback shop --wait\n  relayctl rollback shop 3f1c2a4e-... --wait",
    )
    .action(
      async (
        app: string,
        release: string | undefined,
        o: { wait?: boolean; timeout?: number },
        cmd: Command,
      ) => {
        const { api, json } = ctxOf(cmd);
        const a = await application(api, app);
        const tid = await tenantId(api);
        const base = `/api/tenants/${tid}/applications/${a.id}`;
        const started = await api.call<Started>("POST", `${base}/rollback`, "dashboard", {
          ...(release ? { release } : {}),
          ...(o.timeout ? { timeout_seconds: o.timeout } : {}),
        });
        await report(api, json, a, base, started, "Rollback", o.wait);
      },
    );

  program
    .command("releases <app>")
    .description(
      "an application's releases, newest (live) first: which one serves, and which can be rolled back to",
    )
    .addHelpText("after", "\nExamples:\n  relayctl releases shop\n  relayctl releases shop --json")
    .action(async (app: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      const tid = await tenantId(api);
      const r = await api.call<{ releases: Record<string, unknown>[] }>(
        "GET",
        `/api/tenants/${tid}/applications/${a.id}/releases`,
        "dashboard",
      );
      emit(json, r, () =>
        printTable(
          r.releases.map((x) => ({
            ...x,
            live: x.live ? "live" : "",
            kept: x.image_kept ? "yes" : "no (pruned)",
            commit: typeof x.commit_sha === "string" ? x.commit_sha.slice(0, 12) : "",
            rollback_of: x.rollback_of ?? "",
          })),
          [
            ["DEPLOYMENT", "deployment_id"],
            ["LIVE", "live"],
            ["SINCE", "since"],
            ["COMMIT", "commit"],
            ["IMAGE", "image"],
            ["KEPT", "kept"],
            ["ROLLBACK OF", "rollback_of"],
          ],
        ),
      );
    });

  registerDeployments(program);
  registerRollouts(program);
}

interface Started {
  operation_id: string;
  deployment_id: string;
  status: string;
  /** A fleet application's deploy is a rollout (docs/fleets.md). */
  rollout_id?: string;
}

/**
 * Prints a started deployment with how to follow it and its dashboard page, or
 * with `wait` follows it to its end and fails unless it completed.
 */
async function report(
  api: Api,
  json: boolean | undefined,
  app: AppRef,
  base: string,
  started: Started,
  what: "Deployment" | "Rollback",
  wait?: boolean,
) {
  if (started.rollout_id)
    return reportRollout(api, json, app, { ...started, rollout_id: started.rollout_id }, what, wait);
  const id = started.deployment_id;
  if (!wait) {
    const page = `${api.baseUrl}/app/applications/${app.id}/deployments/${id}`;
    emit(json, { ...started, dashboard_url: page }, () =>
      process.stdout.write(
        `${what} ${id} of ${app.name} started (operation ${started.operation_id}).\n` +
          `Follow it: relayctl deploy ${app.name} --follow ${id}\n` +
          `Dashboard: ${page}\n`,
      ),
    );
    return;
  }
  if (!json) process.stderr.write(`${what} ${id} of ${app.name} started.\n`);
  await finish(api, json, `${base}/deployments/${id}`);
}

/**
 * Follows a deployment to its outcome, prints its view, and fails unless it completed;
 * `quiet` waits without printing the steps and the log (previews create --wait).
 */
export async function finish(api: Api, json: boolean | undefined, path: string, quiet = false) {
  const view = await followDeployment(api, path, Boolean(json) || quiet);
  emit(json, view, () =>
    printFields(view, [
      "deployment_id",
      "status",
      "trigger",
      "commit_sha",
      "image",
      "container_name",
      "host_port",
      "upstream",
      "url",
      "failed_step",
      "error",
      "duration_ms",
    ]),
  );
  if (view.status !== "completed") {
    throw new CliError(
      `deployment ${view.status}${view.failed_step ? ` at ${view.failed_step}` : ""}${view.error ? `: ${view.error}` : ""}`,
      EXIT.failed,
    );
  }
  // The line a person looks for (--json has the view's url instead).
  if (!json && typeof view.url === "string") process.stdout.write(`live at ${view.url}\n`);
}
