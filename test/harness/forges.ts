// What the GitLab and Gitea/Forgejo tests share (forges*.test.ts): the test application's
// repository served by a local stand-in of each forge (harness/forge-api.ts: its documented
// commit-status and comment APIs, and git's smart HTTP to the project token only), a deploy
// stack that links applications to them, deliveries sent as each forge sends them, and what
// the tests read back (a delivery's outcome as the tenant sees it, deployments, statuses).
// One stack per test file: forgeStack() registers the hooks that set the bindings below
// before the file's tests run (they are this module's, so the helpers here read them too).
import { randomBytes, randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import type { TestFn } from "ava";
import { describe } from "./assertions";
import { cleanupAll, makeTempDir } from "./cleanup";
import { type App, type DeployStack, startDeployStack } from "./deploy-stack";
import { type ForgeStandIn, startForgeStandIn } from "./forge-api";
import { type AppRepo, createAppRepo } from "./git-repo";
import { pollUntil } from "./wait";

// biome-ignore lint/suspicious/noExplicitAny: fixtures are read and edited field by field
export type Json = Record<string, any>;
export const GITLAB_TOKEN = `glpat-${randomBytes(10).toString("hex")}`;
export const GITEA_TOKEN = randomBytes(20).toString("hex");
export const fixture = (name: string): Json =>
  JSON.parse(readFileSync(join(__dirname, "..", "fixtures", "forges", name), "utf8")) as Json;

export let s: DeployStack;
export let repo: AppRepo;
export let gitlab: ForgeStandIn;
export let gitea: ForgeStandIn;

/**
 * Registers the file's hooks: the repository, both forges and the stack started before its
 * tests, everything cleaned up after.
 */
export function forgeStack(test: TestFn): void {
  test.before(async () => {
    repo = await createAppRepo({ name: "app", first: "1" });
    // The forges serve <base>/<project>.git: GitLab's acme/web/app, Gitea's acme/app.
    const root = makeTempDir("forge-root");
    mkdirSync(join(root, "acme", "web"), { recursive: true });
    symlinkSync(repo.path, join(root, "acme", "web", "app.git"));
    symlinkSync(repo.path, join(root, "acme", "app.git"));
    gitlab = await startForgeStandIn("gitlab", root, GITLAB_TOKEN);
    gitea = await startForgeStandIn("gitea", root, GITEA_TOKEN);
    s = await startDeployStack({ serverEnv: { RELAYCTL_PUBLIC_URL: "https://relayctl.example" } });
  });
  test.after.always(cleanupAll);
}

export async function connect(kind: string, baseUrl: string, token: string) {
  const res = await s.manage("/forges", {
    body: { kind, name: `${kind}-${randomUUID().slice(0, 6)}`, base_url: baseUrl, api_token: token },
  });
  if (res.status !== 201) throw new Error(`POST /api/forges: ${describe(res)}`);
  return { id: String(res.json.id), secret: String(res.json.webhook_secret), created: res };
}

/** An application with no source and no build, linked to a forge project (the link gives it both). */
export async function linkedApp(connectionId: string, project: string): Promise<App> {
  const app = await s.createApp({ auto_deploy: true, git_repository: null, build: undefined });
  const res = await s.manage(`/applications/${app.id}/forge-repository`, {
    method: "PUT",
    body: { connection_id: connectionId, project },
  });
  if (res.status !== 200) throw new Error(`PUT forge-repository: ${describe(res)}`);
  return app;
}

export async function send(path: string, headers: Record<string, string>, body: string) {
  const res = await fetch(`${s.c.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : {}) as Json };
}

/** The tenant's view of a delivery once processed (polling the database, then the API). */
export async function processed(connectionId: string, id: string): Promise<Json> {
  await pollUntil(
    async () =>
      (
        await s.c.db.query("SELECT 1 FROM forge_deliveries WHERE id = ? AND status IN ('done', 'failed')", [
          id,
        ])
      ).length === 1 || undefined,
    { what: `forge delivery ${id} processed`, timeoutMs: 30_000 },
  );
  const res = await s.manage(`/forges/${connectionId}/deliveries?limit=100`);
  const d = (res.json.deliveries as Json[]).find((x) => x.delivery_id === id);
  if (!d) throw new Error(`delivery ${id} not listed: ${describe(res)}`);
  return d;
}

export const deploymentsOf = async (appId: string) =>
  s.c.db.query<{ id: string; operation_id: string }>(
    "SELECT id, operation_id FROM deployments WHERE application_id = ? ORDER BY seq",
    [appId],
  );

export async function statusesUntilFinal(forge: ForgeStandIn, sha: string) {
  return pollUntil(
    () => {
      const mine = forge.statuses.filter((x) => x.sha === sha);
      return mine.some((x) => ["success", "failed", "failure", "error"].includes(x.state)) ? mine : undefined;
    },
    { what: `a final commit status for ${sha.slice(0, 12)}`, timeoutMs: 180_000 },
  );
}
