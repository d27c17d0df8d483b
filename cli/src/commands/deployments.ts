// deployments: an application's recent deployments (the dashboard API's
// history, newest first) with what a person picks one by: id, status, commit,
// trigger and age; `relayctl deploy --follow <id>` follows one of them.
import { UUID } from "@relayctl/reverse-proxy-sync/uuid";
import type { Command } from "commander";
import type { Api } from "../client.js";
import { type AppRef, application, ctxOf, tenantId } from "../context.js";
import { CliError, EXIT, usageError } from "../errors.js";
import { emit, printTable } from "../output.js";

/** "42s ago", "5m ago", "3h ago", "2d ago": how long ago an ISO time was. */
export function age(iso: unknown, now = Date.now()): string {
  const t = typeof iso === "string" ? Date.parse(iso) : Number.NaN;
  if (Number.isNaN(t)) return "-";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

/**
 * The application a deployment belongs to, for `deploy --follow <id>` without
 * the application: each application of the organization is asked for it.
 */
export async function findDeployment(api: Api, tid: string, id: string): Promise<AppRef> {
  if (!UUID.test(id.toLowerCase())) throw usageError(`--follow: '${id}' is not a deployment id`);
  const { applications } = await api.call<{ applications: AppRef[] }>(
    "GET",
    "/api/applications",
    "dashboard",
  );
  const found = await Promise.all(
    applications.map(async (a) => {
      const path = `/api/tenants/${tid}/applications/${a.id}/deployments/${id.toLowerCase()}`;
      try {
        await api.call("GET", path, "dashboard");
        return a;
      } catch (err) {
        // Another application's: 404. Anything else is worth saying.
        if (err instanceof CliError && err.exitCode === EXIT.refused) return undefined;
        throw err;
      }
    }),
  );
  const a = found.find((x) => x !== undefined);
  if (!a) throw new CliError(`deployment '${id}' not found`, EXIT.refused);
  return a;
}

export function registerDeployments(program: Command): void {
  program
    .command("deployments <app>")
    .description("an application's recent deployments, newest first")
    .option("--limit <n>", "how many (1-100, default 20)")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl deployments shop\n  relayctl deployments shop --limit 5 --json\n  relayctl deploy shop --follow <deployment id>   # follow one of them",
    )
    .action(async (app: string, o: { limit?: string }, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      if (o.limit !== undefined && !/^\d{1,3}$/.test(o.limit))
        throw usageError("--limit: a number, 1 to 100");
      const a = await application(api, app);
      const tid = await tenantId(api);
      const q = o.limit === undefined ? "" : `?limit=${o.limit}`;
      const r = await api.call<{ deployments: Record<string, unknown>[] }>(
        "GET",
        `/api/tenants/${tid}/applications/${a.id}/deployments${q}`,
        "dashboard",
      );
      emit(json, r, () =>
        printTable(
          r.deployments.map((d) => ({
            ...d,
            commit: typeof d.commit_sha === "string" ? d.commit_sha.slice(0, 12) : d.commit_ref,
            age: age(d.created_at),
          })),
          [
            ["DEPLOYMENT", "deployment_id"],
            ["STATUS", "status"],
            ["COMMIT", "commit"],
            ["TRIGGER", "trigger"],
            ["AGE", "age"],
          ],
        ),
      );
    });
}
