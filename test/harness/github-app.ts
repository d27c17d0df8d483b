// What the GitHub App tests share (github-app*.test.ts): GitHub's API stood in for
// (harness/github-api.ts, checking the App JWT signed with the test key), the private
// repository served over smart HTTP with basic auth that accepts only tokens the stand-in
// minted, a deploy stack configured as the App with one auto-deploying application, and
// deliveries as GitHub sends them: the real example payloads of @octokit/webhooks-examples,
// signed with @octokit/webhooks' own signer, their outcome read as the tenant sees it.
// One stack per test file: githubAppStack() registers the hooks that set the bindings below
// before the file's tests run (they are this module's, so the helpers here read them too).
import { randomBytes, randomUUID } from "node:crypto";
import { symlinkSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { TestFn } from "ava";
import { describe } from "./assertions";
import { cleanupAll } from "./cleanup";
import { type App, type DeployStack, startDeployStack } from "./deploy-stack";
import { type GitHttpServer, startGitHttp } from "./git-http";
import { type AppRepo, createAppRepo } from "./git-repo";
import { type GitHubApiStandIn, githubAppEnv, startGitHubApi } from "./github-api";
import { bindInstallation, githubWebhooks, installAndLink } from "./github-webhooks";
import { pollUntil } from "./wait";

// biome-ignore lint/suspicious/noExplicitAny: example payloads are read and edited field by field
export type Json = Record<string, any>;
export const INSTALLATION = 31337;
export const REPO_ID = 1296269;
export const FULL_NAME = "octo-org/app";
const SECRET = randomBytes(24).toString("hex");

export let gh: GitHubApiStandIn;
export let git: GitHttpServer;
export let repo: AppRepo;
export let s: DeployStack;
export let app: App;
export let sign: (body: string) => Promise<string>;
let examples: { name: string; examples: Json[] }[];

export const example = (event: string, pick: (e: Json) => boolean): Json => {
  const found = examples.find((e) => e.name === event)?.examples.find(pick);
  if (!found) throw new Error(`no ${event} example`);
  return structuredClone(found);
};
export const repositoryJson = (name = FULL_NAME) => ({
  ...example("push", (e) => e.ref === "refs/heads/master").repository,
  id: REPO_ID,
  name: name.split("/")[1],
  full_name: name,
  private: true,
  default_branch: "main",
  clone_url: git.url(name.split("/")[1]!),
});

export async function deliver(
  event: string,
  payload: Json,
  opts: { id?: string; signature?: string | null; body?: string } = {},
) {
  const body = opts.body ?? JSON.stringify(payload);
  const id = opts.id ?? randomUUID();
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "x-github-event": event,
    "x-github-delivery": id,
    "user-agent": "GitHub-Hookshot/test",
  };
  const signature = opts.signature === undefined ? await sign(body) : opts.signature;
  if (signature !== null) headers["x-hub-signature-256"] = signature;
  const res = await fetch(`${s.c.baseUrl}/webhooks/github`, { method: "POST", headers, body });
  const text = await res.text();
  return { id, status: res.status, json: text ? (JSON.parse(text) as Json) : {} };
}

export function pushPayload(
  sha: string,
  opts: {
    ref?: string;
    deleted?: boolean;
    message?: string;
    before?: string;
    author?: { name: string; email: string };
  } = {},
): Json {
  const p = example("push", (e) => e.ref === "refs/heads/master" && !e.deleted);
  p.ref = opts.ref ?? "refs/heads/main";
  p.after = opts.deleted ? "0000000000000000000000000000000000000000" : sha;
  p.deleted = Boolean(opts.deleted);
  p.before = opts.before ?? "0000000000000000000000000000000000000000";
  p.head_commit = opts.deleted
    ? null
    : {
        ...p.head_commit,
        id: sha,
        message: opts.message ?? "a commit",
        ...(opts.author ? { author: { ...p.head_commit.author, ...opts.author } } : {}),
      };
  p.repository = repositoryJson();
  p.installation = { id: INSTALLATION, node_id: "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==" };
  return p;
}

/**
 * Waits until the stored delivery matches `done` (polling the database: the API
 * key's contract limit of 100 requests a minute would be spent in seconds), then
 * returns the tenant's view of it from the API.
 */
export async function deliveryWhen(id: string, done: string, what: string): Promise<Json> {
  await pollUntil(
    async () =>
      (await s.c.db.query(`SELECT 1 FROM github_deliveries WHERE id = ? AND ${done}`, [id])).length === 1 ||
      undefined,
    { what, timeoutMs: 30_000 },
  );
  const res = await s.manage("/github/deliveries?limit=100");
  if (res.status !== 200) throw new Error(`GET /github/deliveries: ${describe(res)}`);
  const d = (res.json.deliveries as Json[]).find((x) => x.delivery_id === id);
  if (!d) throw new Error(`delivery ${id} is not shown to its tenant: ${JSON.stringify(res.json)}`);
  return d;
}

/** The tenant's view of one delivery, once processed. */
export async function processed(id: string): Promise<Json> {
  return deliveryWhen(id, "status IN ('done', 'failed')", `delivery ${id} processed`);
}

/** The tenant's `github.delivery` audit events of one delivery. */
export async function deliveryAudits(id: string): Promise<Json[]> {
  const res = await s.manage("/audit?limit=1000");
  return (res.json.events as Json[]).filter(
    (e) => e.event_type === "github.delivery" && e.payload.delivery_id === id,
  );
}

export async function deploymentCount(): Promise<number> {
  const rows = await s.c.db.query<{ n: number }>(
    "SELECT COUNT(*) AS n FROM deployments WHERE application_id = ?",
    [app.id],
  );
  return Number(rows[0]!.n);
}

/** The repository, its git server, GitHub's stand-in and a deploy stack that is the App, with `app`. */
async function startGitHubApp(): Promise<void> {
  examples = (await import("@octokit/webhooks-examples")).default as never;
  const { Webhooks } = await import("@octokit/webhooks");
  const webhooks = new Webhooks({ secret: SECRET });
  sign = (body) => webhooks.sign(body);
  gh = await startGitHubApi();
  repo = await createAppRepo({ name: "app", first: "1" });
  // The repository's new name after the rename test, served from the same work tree.
  symlinkSync(repo.path, join(dirname(repo.path), "app-renamed"));
  git = await startGitHttp(dirname(repo.path), "x-access-token", (token) => gh.acceptsToken(token));
  gh.repositories.set(REPO_ID, {
    id: REPO_ID,
    full_name: FULL_NAME,
    default_branch: "main",
    private: true,
    clone_url: git.url(basename(repo.path)),
  });
  s = await startDeployStack({ serverEnv: githubAppEnv(gh, SECRET) });
  app = await s.createApp({ auto_deploy: true, git_repository: git.url("app") });
}

/**
 * The App installed on the repository as the setup URL leaves it (github-app.test.ts's subject):
 * GitHub knows the installation, its `created` delivery has been processed, and it is bound to
 * the stack's tenant; with `link`, `app` is linked to the repository as well.
 */
async function installApp(link: boolean): Promise<void> {
  gh.installations.set(INSTALLATION, {
    id: INSTALLATION,
    account: { login: "octo-org", type: "Organization" },
    created_at: new Date().toISOString(),
    repositories: [REPO_ID],
  });
  const created = example("installation", (e) => e.action === "created");
  created.installation = {
    ...created.installation,
    account: { ...created.installation.account, login: "octo-org" },
  };
  const hooks = await githubWebhooks(s.c.baseUrl, s.c.db, SECRET);
  const on = { installation: INSTALLATION, repositoryId: REPO_ID, fullName: FULL_NAME };
  if (link) await installAndLink(s, hooks, created, { ...on, applicationId: app.id });
  else await bindInstallation(s, hooks, created, on);
}

/**
 * Registers the file's hooks: the stack started before its tests (with the App installed and
 * bound, or bound and `app` linked, when `installed` says so), everything cleaned up after.
 */
export function githubAppStack(test: TestFn, o: { installed?: "bound" | "linked" } = {}): void {
  test.before(async () => {
    await startGitHubApp();
    if (o.installed) await installApp(o.installed === "linked");
  });
  test.after.always(cleanupAll);
}
