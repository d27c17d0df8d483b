// A fleet application's rollouts (docs/fleets.md): `relayctl deploy <app> --wait`
// on an application with a placement follows its rollout here, printing each
// server's state as it changes (`[web-1] deploying`, `[web-1] succeeded`) and
// the servers' table at the end, and exits non-zero unless every server
// succeeded; `relayctl rollouts <app> [rollout]` lists them or shows one.
import { setTimeout as sleep } from "node:timers/promises";
import type { Command } from "commander";
import type { Api } from "../client.js";
import { type AppRef, application, ctxOf } from "../context.js";
import { CliError, EXIT } from "../errors.js";
import { emit, printFields, printTable } from "../output.js";

/** The rollout is read this often while it runs (a rollout takes seconds to minutes). */
const POLL_MS = 1000;

interface RolloutServer {
  server_name: string;
  state: string;
  batch: number;
  failed_step: string | null;
  detail: string | null;
  deployment_id: string | null;
}
interface Rollout {
  rollout_id: string;
  status: string;
  detail: string | null;
  servers: RolloutServer[];
}

const SERVER_COLUMNS: [string, string][] = [
  ["SERVER", "server_name"],
  ["BATCH", "batch"],
  ["STATE", "state"],
  ["FAILED STEP", "failed_step"],
  ["DEPLOYMENT", "deployment_id"],
  ["DETAIL", "detail"],
];

const pathOf = (app: AppRef, id: string) => `/api/applications/${app.id}/rollouts/${encodeURIComponent(id)}`;

/** Follows a rollout to its end, each server's state changes on stderr; fails unless all succeeded. */
export async function followRollout(api: Api, json: boolean | undefined, app: AppRef, id: string) {
  const said = new Map<string, string>();
  let r: Rollout;
  for (;;) {
    r = await api.call<Rollout>("GET", pathOf(app, id), "dashboard");
    if (!json)
      for (const s of r.servers) {
        if (said.get(s.server_name) === s.state) continue;
        said.set(s.server_name, s.state);
        process.stderr.write(`[${s.server_name}] ${s.state}${s.failed_step ? ` at ${s.failed_step}` : ""}\n`);
      }
    if (r.status !== "running") break;
    await sleep(POLL_MS);
  }
  emit(json, r, () => {
    printTable(r.servers as unknown as Record<string, unknown>[], SERVER_COLUMNS);
    process.stdout.write(`\nrollout ${r.status}: ${r.detail ?? ""}\n`);
  });
  const failed = r.servers.filter((s) => s.state === "failed" || s.state === "rollback_failed");
  if (r.status !== "succeeded" || failed.length > 0)
    throw new CliError(
      `rollout ${r.status}: ${failed.map((s) => `${s.server_name} ${s.state}${s.failed_step ? ` at ${s.failed_step}` : ""}`).join(", ") || (r.detail ?? "")}`,
      EXIT.failed,
    );
}

/** A started deploy or rollback of a fleet: printed with how to follow it, or followed with `wait`. */
export async function reportRollout(
  api: Api,
  json: boolean | undefined,
  app: AppRef,
  started: { operation_id: string; deployment_id: string; rollout_id: string },
  what: string,
  wait?: boolean,
) {
  if (!wait) {
    emit(json, started, () =>
      process.stdout.write(
        `${what} of ${app.name} started as rollout ${started.rollout_id} (operation ${started.operation_id}).\n` +
          `Follow it: relayctl rollouts ${app.name} ${started.rollout_id}\n`,
      ),
    );
    return;
  }
  if (!json) process.stderr.write(`${what} of ${app.name} started as rollout ${started.rollout_id}.\n`);
  await followRollout(api, json, app, started.rollout_id);
}

export function registerRollouts(program: Command): void {
  program
    .command("rollouts <app> [rollout]")
    .description("a fleet application's rollouts, newest first, or one with its servers' states")
    .addHelpText("after", "\nExamples:\n  relayctl rollouts shop\n  relayctl rollouts shop 5d1e... --json")
    .action(async (app: string, id: string | undefined, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      if (id !== undefined) {
        const r = await api.call<Rollout & Record<string, unknown>>("GET", pathOf(a, id), "dashboard");
        emit(json, r, () => {
          printFields(r, ["rollout_id", "kind", "status", "detail", "created_at", "finished_at"]);
          process.stdout.write("\n");
          printTable(r.servers as unknown as Record<string, unknown>[], SERVER_COLUMNS);
        });
        return;
      }
      const list = await api.call<{ rollouts: (Rollout & Record<string, unknown>)[] }>(
        "GET",
        `/api/applications/${a.id}/rollouts`,
        "dashboard",
      );
      emit(json, list, () =>
        printTable(
          list.rollouts.map((r) => ({
            ...r,
            servers: r.servers.map((s) => `${s.server_name}:${s.state}`).join(" "),
          })),
          [
            ["ROLLOUT", "rollout_id"],
            ["KIND", "kind"],
            ["STATUS", "status"],
            ["CREATED", "created_at"],
            ["SERVERS", "servers"],
          ],
        ),
      );
    });
}
