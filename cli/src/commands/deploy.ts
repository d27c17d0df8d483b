// deploy: schedules a deployment (dashboard API) and, with --wait, follows its
// live log (text/event-stream: `progress` events, then `end` with the final
// view) and exits non-zero when it failed or timed out. rollback: the same for
// a rollback to a kept release (no build); releases: what can be rolled back to.
import type { Command } from "commander";
import type { Api } from "../client.js";
import { application, ctxOf, tenantId } from "../context.js";
import { CliError, EXIT } from "../errors.js";
import { emit, printFields, printTable } from "../output.js";
import { sseEvents } from "../sse.js";

/** Follows the log to its end; returns the final deployment view. */
export async function followDeployment(
  api: Api,
  path: string,
  quiet: boolean,
): Promise<Record<string, unknown>> {
  const res = await api.raw("GET", `${path}/log`, "dashboard", undefined, "text/event-stream");
  if (!res.body) throw new CliError("the log stream ended at once", EXIT.server);
  for await (const e of sseEvents(res.body)) {
    if (e.event === "progress") {
      if (quiet) continue;
      const p = JSON.parse(e.data) as { step: string; status: string; log?: string };
      process.stderr.write(`[${p.step}] ${p.status}\n`);
      if (p.log) process.stdout.write(p.log.endsWith("\n") ? p.log : `${p.log}\n`);
    } else if (e.event === "end") {
      return JSON.parse(e.data) as Record<string, unknown>;
    }
  }
  // The stream closed without its end event (the server restarted): read the view instead.
  return api.call("GET", path, "dashboard");
}

export function registerDeploy(program: Command): void {
  program
    .command("deploy <app>")
    .description("deploy an application (by name or id)")
    .option("--ref <ref>", "branch, tag or commit SHA (default: the application's deploy branch)")
    .option("--wait", "follow the deployment's progress and live log; exit non-zero unless it succeeds")
    .option("--timeout <seconds>", "the deployment's deadline (1-3600, server default 60)", Number)
    .addHelpText("after", "\nExamples:\n  relayctl deploy shop\n  relayctl deploy shop --ref v1.4.2 --wait")
    .action(async (app: string, o: { ref?: string; wait?: boolean; timeout?: number }, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      const tid = await tenantId(api);
      const base = `/api/tenants/${tid}/applications/${a.id}`;
      const started = await api.call<Started>("POST", `${base}/deploy`, "dashboard", {
        ...(o.ref ? { commit_ref: o.ref } : {}),
        ...(o.timeout ? { timeout_seconds: o.timeout } : {}),
      });
      await report(api, json, base, started, `Deployment ${started.deployment_id} of ${a.name}`, o.wait);
    });

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
        await report(api, json, base, started, `Rollback ${started.deployment_id} of ${a.name}`, o.wait);
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
}

interface Started {
  operation_id: string;
  deployment_id: string;
  status: string;
}

/** Prints a started deployment, or with `wait` follows it to its end and fails unless it completed. */
async function report(
  api: Api,
  json: boolean | undefined,
  base: string,
  started: Started,
  what: string,
  wait?: boolean,
) {
  if (!wait) {
    emit(json, started, () => process.stdout.write(`${what} started (operation ${started.operation_id}).\n`));
    return;
  }
  if (!json) process.stderr.write(`${what} started.\n`);
  const view = await followDeployment(api, `${base}/deployments/${started.deployment_id}`, Boolean(json));
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
