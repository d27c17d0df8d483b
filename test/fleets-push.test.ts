// A push to a fleet application (one with a placement) rolls the commit out to
// every server of its placement (a push during a rollout waits for it, its status
// `pending` meanwhile), and the commit's status follows the rollout:
// real agents with their own podman stores and Caddy (harness/fleet-stack.ts),
// GitHub's API the only stand-in (harness/github-api.ts), push deliveries
// @octokit/webhooks-examples' own payload signed as GitHub signs them.
import { randomBytes } from "node:crypto";
import { basename, dirname } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type FleetServer, addFleetServer } from "./harness/fleet-stack";
import { type GitHttpServer, startGitHttp } from "./harness/git-http";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { type GitHubApiStandIn, githubAppEnv, startGitHubApi } from "./harness/github-api";
import { type GitHubWebhooks, githubWebhooks, installAndLink } from "./harness/github-webhooks";
import { proxyGet } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

// biome-ignore lint/suspicious/noExplicitAny: example payloads are read and edited field by field
type Json = Record<string, any>;
const INSTALLATION = 51_337;
const REPO_ID = 3_296_269;
const FULL_NAME = "octo-org/fleet-app";
const SECRET = randomBytes(24).toString("hex");
const tag = `fp${Math.random().toString(36).slice(2, 7)}`;

let gh: GitHubApiStandIn;
let git: GitHttpServer;
let repo: AppRepo;
let s: DeployStack;
let app: App;
let a: FleetServer;
let b: FleetServer;
let hooks: GitHubWebhooks;
let examples: { name: string; examples: Json[] }[];

const example = (event: string, pick: (e: Json) => boolean): Json => {
  const found = examples.find((e) => e.name === event)?.examples.find(pick);
  if (!found) throw new Error(`no ${event} example`);
  return structuredClone(found);
};

/** GitHub's push example, moved to this repository's main branch at `sha`. */
function pushPayload(sha: string, message: string): Json {
  const p = example("push", (e) => e.ref === "refs/heads/master" && !e.deleted);
  p.ref = "refs/heads/main";
  p.after = sha;
  p.before = "0000000000000000000000000000000000000000";
  p.head_commit = { ...p.head_commit, id: sha, message };
  p.repository = { ...p.repository, id: REPO_ID, full_name: FULL_NAME, name: basename(FULL_NAME) };
  p.installation = { id: INSTALLATION };
  return p;
}

async function rollout(id: string): Promise<Json> {
  const res = await s.manage(`/applications/${app.id}/rollouts/${id}`);
  if (res.status !== 200) throw new Error(`GET rollout: ${describe(res)}`);
  return res.json;
}

/** Waits for the rollout to end; its final view. */
async function rolloutEnded(id: string): Promise<Json> {
  return pollUntil(
    async () => {
      const r = await rollout(id);
      return r.status === "running" ? undefined : r;
    },
    { what: `rollout ${id} ended`, timeoutMs: 240_000, intervalMs: 500 },
  );
}

/** The states the stand-in was told for `sha`, once one of them is final. */
async function statusesUntilFinal(sha: string) {
  return pollUntil(
    async () => {
      const mine = gh.statuses.filter((x) => x.sha === sha);
      return mine.some((x) => x.state !== "pending") ? mine : undefined;
    },
    { what: `a final status of ${sha.slice(0, 12)} on the stand-in`, timeoutMs: 60_000 },
  );
}

/** The statuses told of `sha` so far, once one of them is `pick`'s. */
async function statusesWhere(sha: string, pick: (x: (typeof gh.statuses)[number]) => boolean) {
  return pollUntil(
    async () => {
      const mine = gh.statuses.filter((x) => x.sha === sha);
      return mine.some(pick) ? mine : undefined;
    },
    { what: `a status of ${sha.slice(0, 12)} on the stand-in`, timeoutMs: 30_000 },
  );
}

const bodyAt = async (srv: FleetServer) => (await proxyGet(srv.proxyPort, app.fqdn)).body;

test.before(async () => {
  examples = (await import("@octokit/webhooks-examples")).default as never;
  gh = await startGitHubApi();
  repo = await createAppRepo({ name: "fleet-app", first: "1" });
  git = await startGitHttp(dirname(repo.path), "x-access-token", (token) => gh.acceptsToken(token));
  gh.repositories.set(REPO_ID, {
    id: REPO_ID,
    full_name: FULL_NAME,
    default_branch: "main",
    private: true,
    clone_url: git.url(basename(repo.path)),
  });
  gh.installations.set(INSTALLATION, {
    id: INSTALLATION,
    account: { login: "octo-org", type: "Organization" },
    created_at: new Date().toISOString(),
    repositories: [REPO_ID],
  });
  s = await startDeployStack({ serverEnv: githubAppEnv(gh, SECRET) });
  hooks = await githubWebhooks(s.c.baseUrl, s.c.db, SECRET);
  [a, b] = await Promise.all([
    addFleetServer(s, `${tag}-a`, { tier: "web" }),
    addFleetServer(s, `${tag}-b`, { tier: "web" }),
  ]);
  app = await s.createApp({
    server_id: a.id,
    placement: { selector: "tier=web" },
    auto_deploy: true,
    git_repository: git.url("fleet-app"),
    health_check_timeout_seconds: 4,
  } as Parameters<DeployStack["createApp"]>[0]);
  await installAndLink(
    s,
    hooks,
    example("installation", (e) => e.action === "created"),
    {
      installation: INSTALLATION,
      repositoryId: REPO_ID,
      fullName: FULL_NAME,
      applicationId: app.id,
    },
  );
});
test.after.always(cleanupAll);

test.serial(
  "fleet push - a push rolls the commit out to every server of the placement; the commit's status follows the rollout",
  async (t) => {
    const v2 = await repo.commitVersion("2", "Ship version 2 to the fleet");
    const outcome = await hooks.processed(await hooks.deliver("push", pushPayload(v2.sha, v2.message)));
    t.is(outcome.result, "deployed", JSON.stringify(outcome));
    const [entry] = outcome.deployments as Json[];
    t.like(entry, { application_id: app.id, commit_sha: v2.sha });
    t.truthy(entry.rollout_id, "the delivery names the rollout");
    const done = await rolloutEnded(String(entry.rollout_id));
    t.is(done.status, "succeeded", JSON.stringify(done));
    t.deepEqual(
      (done.servers as Json[]).map((x) => [x.server_name, x.state]),
      [
        [a.name, "succeeded"],
        [b.name, "succeeded"],
      ],
    );
    t.is((done.servers as Json[])[0].deployment_id, entry.deployment_id, "its first server's deployment");
    // Each server's own Caddy serves the pushed commit.
    t.regex(await bodyAt(a), /version 2/);
    t.regex(await bodyAt(b), /version 2/);
    for (const x of done.servers as Json[]) {
      const d = await s.deployment(app.id, String(x.deployment_id));
      t.like(d.json, { trigger: "webhook", commit_sha: v2.sha, triggered_by: { type: "github_app" } });
    }
    // One status context for the application: pending while it rolls out, then success.
    const told = await statusesUntilFinal(v2.sha);
    t.deepEqual(
      told.map((x) => x.state),
      ["pending", "success"],
    );
    const last = told.at(-1)!;
    t.like(last, {
      full_name: FULL_NAME,
      context: `relayctl/${app.name}`,
      description: "rolled out: deployed and serving on every server",
      target_url: `https://relayctl.example/app/applications/${app.id}/rollouts/${entry.rollout_id}`,
    });
    // The link is the rollout's dashboard page, served by this control plane.
    const page = await fetch(`${s.c.baseUrl}${new URL(String(last.target_url)).pathname}`);
    t.is(page.status, 200);
    t.regex(page.headers.get("content-type") ?? "", /text\/html/);
  },
);

test.serial(
  "fleet push - a push while a rollout runs waits for it, a newer one takes its place, and the newest rolls out when it ends; a commit that never serves reports failure",
  async (t) => {
    // A pause between the two servers keeps the rollout running while the next pushes arrive.
    const slow = await s.manage(`/applications/${app.id}`, {
      method: "PATCH",
      body: { rollout_strategy: { max_parallel: 1, pause_seconds: 20 } },
    });
    t.is(slow.status, 200, describe(slow));
    const v3 = await repo.commitVersion("3", "version 3");
    const first = await hooks.processed(await hooks.deliver("push", pushPayload(v3.sha, v3.message)));
    t.is(first.result, "deployed", JSON.stringify(first));
    const rolloutId = String((first.deployments as Json[])[0].rollout_id);
    const v4 = await repo.commitVersion("4", "version 4");
    const waits = await hooks.processed(await hooks.deliver("push", pushPayload(v4.sha, v4.message)));
    t.is(waits.result, "queued", JSON.stringify(waits));
    t.deepEqual(waits.deployments, []);
    t.like(waits.queued[0], {
      application_id: app.id,
      commit_sha: v4.sha,
      behind_rollout_id: rolloutId,
      superseded_commit_sha: null,
    });
    t.regex(
      String(waits.queued[0].reason),
      new RegExp(`a rollout of the application is running \\(${rolloutId}\\)`),
    );
    // The waiting commit says so on GitHub at once, linking to the rollout it waits for.
    const waiting = await statusesWhere(v4.sha, (x) => x.state === "pending");
    t.like(waiting[0], {
      context: `relayctl/${app.name}`,
      description: "waiting for the running rollout to end",
      target_url: `https://relayctl.example/app/applications/${app.id}/rollouts/${rolloutId}`,
    });
    // A newer push takes the waiting one's place; the next rollout goes without the pause.
    const v5 = await repo.commitVersion("5", "version 5");
    const newer = await hooks.processed(await hooks.deliver("push", pushPayload(v5.sha, v5.message)));
    t.is(newer.result, "queued", JSON.stringify(newer));
    t.like(newer.queued[0], {
      commit_sha: v5.sha,
      behind_rollout_id: rolloutId,
      superseded_commit_sha: v4.sha,
    });
    // The commit it replaced ends as a superseded one does; the newer one waits in its place.
    const replaced = await statusesWhere(v4.sha, (x) => x.state === "error");
    t.deepEqual(
      replaced.map((x) => [x.state, x.description]),
      [
        ["pending", "waiting for the running rollout to end"],
        ["error", "superseded by a newer push before it started"],
      ],
    );
    t.is(replaced[1].target_url, `https://relayctl.example/app/applications/${app.id}`);
    await statusesWhere(v5.sha, (x) => x.state === "pending");
    const plain = await s.manage(`/applications/${app.id}`, {
      method: "PATCH",
      body: { rollout_strategy: null },
    });
    t.is(plain.status, 200, describe(plain));
    t.is((await rolloutEnded(rolloutId)).status, "succeeded");
    t.deepEqual(
      (await statusesUntilFinal(v3.sha)).map((x) => x.state),
      ["pending", "success"],
    );

    // v3's rollout ended: v5's starts on its own, and its status follows it: pending while it
    // waited, pending through its rollout (unless that ended within one pass), then success.
    const told5 = await statusesUntilFinal(v5.sha);
    t.is(told5[0].description, "waiting for the running rollout to end");
    t.true(
      told5.slice(0, -1).every((x) => x.state === "pending"),
      JSON.stringify(told5),
    );
    t.is(told5.at(-1)!.state, "success");
    const next = String(new URL(String(told5.at(-1)!.target_url)).pathname.split("/").at(-1));
    t.not(next, rolloutId);
    const done = await rolloutEnded(next);
    t.is(done.status, "succeeded", JSON.stringify(done));
    for (const x of done.servers as Json[]) {
      const d = await s.deployment(app.id, String(x.deployment_id));
      t.like(d.json, { trigger: "webhook", commit_sha: v5.sha, triggered_by: { type: "github_app" } });
    }
    t.regex(await bodyAt(a), /version 5/);
    t.regex(await bodyAt(b), /version 5/);
    t.deepEqual(
      gh.statuses.filter((x) => x.sha === v4.sha).map((x) => x.state),
      ["pending", "error"],
      "the replaced commit was never rolled out: nothing told of it after its supersession",
    );

    // A commit whose container never answers: the rollout halts on its first server (max_failures
    // 0) and the commit's status says so; the fleet keeps serving version 5.
    const broken = await repo.commitBroken("broken", "a broken release");
    const out = await hooks.processed(await hooks.deliver("push", pushPayload(broken.sha, broken.message)));
    t.is(out.result, "deployed", JSON.stringify(out));
    const halted = await rolloutEnded(String((out.deployments as Json[])[0].rollout_id));
    t.is(halted.status, "halted", JSON.stringify(halted));
    const told = await statusesUntilFinal(broken.sha);
    t.deepEqual(
      told.map((x) => x.state),
      ["pending", "failure"],
    );
    t.is(told.at(-1)!.description, "the rollout halted; the link shows why");
    t.regex(await bodyAt(a), /version 5/);
    t.regex(await bodyAt(b), /version 5/);
  },
);
