// The GitHub App integration against a running control plane (api and gateway
// processes, MariaDB, NATS), a podman agent and Caddy. GitHub's API is the only
// stand-in (harness/github-api.ts, checking the App JWT signed with the test
// key); deliveries are the real example payloads of @octokit/webhooks-examples,
// signed with @octokit/webhooks' own signer; the private repository is served
// over smart HTTP with basic auth that accepts only tokens the stand-in minted.
import { spawnSync } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { gzipSync } from "node:zlib";
import { basename, dirname, join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type GitHttpServer, startGitHttp } from "./harness/git-http";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { axeViolations, launchBrowser } from "./harness/browser";
import { type Dash, signInDash } from "./harness/dashboard-session";
import { type GitHubApiStandIn, githubAppEnv, startGitHubApi } from "./harness/github-api";
import { createOwner } from "./harness/people";
import { waitForBody } from "./harness/traffic";
import { pollUntil } from "./harness/wait";

// biome-ignore lint/suspicious/noExplicitAny: example payloads are read and edited field by field
type Json = Record<string, any>;
const INSTALLATION = 31337;
const REPO_ID = 1296269;
const FULL_NAME = "octo-org/app";
const SECRET = randomBytes(24).toString("hex");

let gh: GitHubApiStandIn;
let git: GitHttpServer;
let repo: AppRepo;
let s: DeployStack;
let app: App;
let sign: (body: string) => Promise<string>;
let examples: { name: string; examples: Json[] }[];
/** The delivery of the first push, which deployed v2. */
let firstPush: { id: string; body: string };

const example = (event: string, pick: (e: Json) => boolean): Json => {
  const found = examples.find((e) => e.name === event)?.examples.find(pick);
  if (!found) throw new Error(`no ${event} example`);
  return structuredClone(found);
};
const repositoryJson = (name = FULL_NAME) => ({
  ...example("push", (e) => e.ref === "refs/heads/master").repository,
  id: REPO_ID,
  name: name.split("/")[1],
  full_name: name,
  private: true,
  default_branch: "main",
  clone_url: git.url(name.split("/")[1]!),
});

async function deliver(
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

function pushPayload(
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
async function deliveryWhen(id: string, done: string, what: string): Promise<Json> {
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
async function processed(id: string): Promise<Json> {
  return deliveryWhen(id, "status IN ('done', 'failed')", `delivery ${id} processed`);
}

/** The tenant's `github.delivery` audit events of one delivery. */
async function deliveryAudits(id: string): Promise<Json[]> {
  const res = await s.manage("/audit?limit=1000");
  return (res.json.events as Json[]).filter(
    (e) => e.event_type === "github.delivery" && e.payload.delivery_id === id,
  );
}

async function deploymentCount(): Promise<number> {
  const rows = await s.c.db.query<{ n: number }>(
    "SELECT COUNT(*) AS n FROM deployments WHERE application_id = ?",
    [app.id],
  );
  return Number(rows[0]!.n);
}

test.before(async () => {
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
});
test.after.always(cleanupAll);

test.serial(
  "github - a missing, wrong-secret or tampered signature is 401 and records nothing",
  async (t) => {
    const body = JSON.stringify(pushPayload(repo.head().sha));
    const id = randomUUID();
    const wrong = await new (await import("@octokit/webhooks")).Webhooks({
      secret: "not-the-secret-at-all",
    }).sign(body);
    const good = await sign(body);
    const cases = {
      missing: await deliver("push", {}, { id, body, signature: null }),
      wrongSecret: await deliver("push", {}, { id, body, signature: wrong }),
      tampered: await deliver(
        "push",
        {},
        { id, body: body.replace('"refs/heads/main"', '"refs/heads/prod"'), signature: good },
      ),
      malformed: await deliver("push", {}, { id, body, signature: "sha256=zz" }),
    };
    for (const [name, res] of Object.entries(cases)) t.is(res.status, 401, name);
    // Signed, but not an event (every GitHub payload is a JSON object): 400, not a 500.
    for (const bad of ["null", "[1]", '"push"', "{not json"]) {
      const res = await deliver("push", {}, { id, body: bad });
      t.is(res.status, 400, `${bad}: ${JSON.stringify(res.json)}`);
      t.truthy(res.json.detail);
    }
    const rows = await s.c.db.query("SELECT id FROM github_deliveries WHERE id = ?", [id]);
    t.is(rows.length, 0);
  },
);

test.serial(
  "github - the setup URL binds an installation to the tenant that asked, for a GitHub user who can access it; a state is single-use and unforgeable",
  async (t) => {
    gh.installations.set(INSTALLATION, {
      id: INSTALLATION,
      account: { login: "octo-org", type: "Organization" },
      created_at: new Date(Date.now() + 1000).toISOString(),
      repositories: [REPO_ID],
    });
    gh.users.set("octo-admin", [INSTALLATION]);
    gh.users.set("bystander", []);
    // The installation arrives by webhook first and waits unbound.
    const created = example("installation", (e) => e.action === "created");
    created.installation = {
      ...created.installation,
      id: INSTALLATION,
      account: { ...created.installation.account, login: "octo-org" },
    };
    created.repositories = [{ id: REPO_ID, name: "app", full_name: FULL_NAME, private: true }];
    // Who installed: the setup URL binds only for them.
    created.sender = { ...created.sender, login: "octo-admin", id: gh.userId("octo-admin") };
    const d = await deliver("installation", created);
    t.is(d.status, 202);
    await pollUntil(
      async () =>
        (await s.c.db.query("SELECT status FROM github_deliveries WHERE id = ? AND status = 'done'", [d.id]))
          .length === 1 || undefined,
      { what: "installation delivery processed", timeoutMs: 30_000 },
    );
    const mineNow = async () => (await s.manage("/github/installations")).json.installations as Json[];
    t.deepEqual(await mineNow(), [], "unbound: nobody's yet");

    // Install links are made and finished by a signed-in person (issue 30, finding 1).
    const owner = await signInDash(s.c.baseUrl, await createOwner(s.c.db.url, s.tenantId));
    const newState = async () => {
      const link = await owner.call("POST", "/api/github/install-link");
      t.is(link.status, 200, describe(link));
      t.true(
        String(link.json.url).startsWith(`${gh.url}/github-apps/relayctl-test/installations/new?state=`),
        String(link.json.url),
      );
      return String(link.json.state);
    };
    const setup = (
      st: string,
      code?: string,
      installationId = INSTALLATION,
      who: Dash = owner,
      headers: Record<string, string> = {},
    ) =>
      fetch(
        `${s.c.baseUrl}/github/setup?installation_id=${installationId}&state=${encodeURIComponent(st)}${code === undefined ? "" : `&code=${code}`}&setup_action=install`,
        { headers: { cookie: `relayctl_session=${who.sessionToken}`, ...headers }, redirect: "manual" },
      );
    // What a browser sends on GitHub's redirect (a top-level navigation).
    const navigation = { accept: "text/html,application/xhtml+xml", "sec-fetch-mode": "navigate" };
    const refusedWith = async (res: Response, status: number, what: string) => {
      const body = (await res.json()) as Json;
      t.is(res.status, status, `${what}: ${JSON.stringify(body)}`);
      return body;
    };

    const state = await newState();
    const [nonce, exp] = state.split(".");
    await refusedWith(
      await setup(`${nonce}.${exp}.${"A".repeat(43)}`, gh.issueCode("octo-admin")),
      400,
      "forged signature",
    );
    // The user authorization is required: without a code, with a code GitHub
    // never issued, or with one of a user who cannot access the installation.
    t.regex(
      (await refusedWith(await setup(await newState()), 403, "no code")).detail,
      /no authorization code/,
    );
    await refusedWith(await setup(await newState(), "0123456789abcdef0123"), 403, "unknown code");
    await refusedWith(await setup(await newState(), gh.issueCode("bystander")), 403, "user without access");
    t.deepEqual(await mineNow(), [], "nothing bound by a refused attempt");

    const code = gh.issueCode("octo-admin");
    // A refusal, in the browser GitHub sent back: the dashboard's GitHub page says why.
    const inBrowser = await setup(
      await newState(),
      gh.issueCode("bystander"),
      INSTALLATION,
      owner,
      navigation,
    );
    t.is(inBrowser.status, 303);
    const refusedAt = new URL(inBrowser.headers.get("location") ?? "", s.c.baseUrl);
    t.is(refusedAt.pathname, "/app/github");
    t.regex(refusedAt.searchParams.get("error") ?? "", /\S/);
    t.deepEqual(await mineNow(), [], "nothing bound by a refusal in the browser either");

    // Installed, in a real browser: GitHub's redirect lands on the dashboard's GitHub page,
    // which says so and lists the installation (not raw JSON).
    const b = await launchBrowser(s.c.baseUrl);
    await b.context.addCookies([{ name: "relayctl_session", value: owner.sessionToken, url: s.c.baseUrl }]);
    await b.page.goto(
      `/github/setup?installation_id=${INSTALLATION}&state=${encodeURIComponent(state)}&code=${code}&setup_action=install`,
    );
    const landed = new URL(b.page.url());
    t.is(`${landed.pathname}${landed.search}`, `/app/github?installed=${INSTALLATION}&account=octo-org`);
    const said = b.page.getByTestId("github-installed");
    await said.waitFor();
    t.regex(await said.innerText(), /The GitHub App is installed on octo-org/);
    await b.page.getByText("octo-org/app").waitFor();
    t.deepEqual(await axeViolations(b.page), [], "the page has no serious accessibility fault");
    t.deepEqual(b.consoleErrors, []);
    await b.browser.close();
    await refusedWith(await setup(state, gh.issueCode("octo-admin")), 400, "the state was spent");
    await refusedWith(await setup(await newState(), code), 403, "the code was spent");

    // Another tenant with a good state of its own cannot take the installation,
    // nor bind one that existed before its link was issued (a guessed id).
    const other = await s.c.admin(["create-tenant", "--name", `other-${randomUUID().slice(0, 6)}`]);
    const otherKey = await s.c.admin([
      "create-api-key",
      "--tenant",
      String(other.tenant_id),
      "--name",
      "other",
    ]);
    const otherOwner = await signInDash(s.c.baseUrl, await createOwner(s.c.db.url, String(other.tenant_id)));
    const otherLink = async () => {
      const res = await otherOwner.call("POST", "/api/github/install-link");
      return String(res.json.state);
    };
    await refusedWith(
      await setup(await otherLink(), gh.issueCode("octo-admin"), INSTALLATION, otherOwner),
      409,
      "bound to the first tenant already",
    );
    // Defence in depth: even a user GitHub lists for it (say an org member with
    // read access to one repository) cannot bind an installation older than the link.
    gh.installations.set(INSTALLATION + 1, {
      id: INSTALLATION + 1,
      account: { login: "victim-org", type: "Organization" },
      created_at: new Date(Date.now() - 3600_000).toISOString(),
      repositories: [],
    });
    gh.users.set("victim-member", [INSTALLATION + 1]);
    const guessed = await refusedWith(
      await setup(await otherLink(), gh.issueCode("victim-member"), INSTALLATION + 1, otherOwner),
      400,
      "an installation older than the link",
    );
    t.regex(guessed.detail, /existed before this install link was issued/);
    // The old race: someone else's brand-new installation, claimed with the
    // attacker's own valid state and the attacker's own code, before its owner comes back.
    gh.installations.set(INSTALLATION + 2, {
      id: INSTALLATION + 2,
      account: { login: "new-victim-org", type: "Organization" },
      created_at: new Date().toISOString(),
      repositories: [],
    });
    gh.users.set("new-victim-admin", [INSTALLATION + 2]);
    gh.users.set("mallory", []);
    await refusedWith(
      await setup(await otherLink(), gh.issueCode("mallory"), INSTALLATION + 2, otherOwner),
      403,
      "a brand-new installation the attacker cannot access",
    );
    const raced = await s.c.db.query<{ tenant_id: string | null }>(
      "SELECT tenant_id FROM github_installations WHERE id = ?",
      [INSTALLATION + 2],
    );
    t.true(
      raced.every((r) => r.tenant_id === null),
      JSON.stringify(raced),
    );
    const theirs = await fetch(`${s.c.baseUrl}/api/github/installations`, {
      headers: { "x-api-key": String(otherKey.key) },
    });
    t.deepEqual(((await theirs.json()) as Json).installations, []);

    const insts = await mineNow();
    t.deepEqual(
      insts.map((i) => i.installation_id),
      [INSTALLATION],
    );
    t.deepEqual(insts[0]?.repositories, [{ repository_id: REPO_ID, full_name: FULL_NAME, private: true }]);
    // The delivery received before the binding is now the tenant's, with what it did.
    t.like(await processed(d.id), {
      event: "installation",
      action: "created",
      outcome: { result: "recorded" },
    });
    t.like(await deliveryAudits(d.id), [
      {
        payload: {
          event: "installation",
          action: "created",
          installation_id: INSTALLATION,
          result: "recorded",
        },
      },
    ]);
    // The users' tokens were used for the one question and went nowhere else.
    t.true(gh.userTokens.length >= 4);
    const dump = await s.c.db.dumpText();
    const logs = s.c.logText();
    for (const u of gh.userTokens) {
      t.false(dump.includes(u), "a user token is stored in no table");
      t.false(logs.includes(u), "nor in any log");
    }
    t.true(gh.refused.length === 0, `stand-in refused: ${gh.refused.join(", ")}`);
  },
);

test.serial(
  "github - deliveries up to GitHub's 25 MB cap are accepted and unknown events ignored; a larger body is refused (413) and not recorded",
  async (t) => {
    const ping = {
      zen: "Keep it logically awesome.",
      hook_id: 1,
      installation: { id: INSTALLATION },
      pad: "",
    };
    const overhead = Buffer.byteLength(JSON.stringify(ping));
    ping.pad = "x".repeat(25 * 1024 * 1024 - overhead);
    const big = await deliver("ping", ping);
    t.is(big.status, 202);
    t.like(await processed(big.id), { event: "ping", outcome: { result: "ignored" } });
    ping.pad += "x";
    // The api answers 413 from the Content-Length alone, unread, and closes: a client still
    // writing megabytes may see EPIPE before the answer. So only the headers go, and the 413
    // must come before a single byte of the body (as test/security-github's bounded-body test).
    const overId = randomUUID();
    const body = JSON.stringify(ping);
    // Signed: an unsigned one is refused (401) before its size is even looked at.
    const signature = await sign(body);
    const req = httpRequest(`${s.c.baseUrl}/webhooks/github`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        "x-github-event": "ping",
        "x-github-delivery": overId,
        "x-hub-signature-256": signature,
      },
    });
    const status = await new Promise<number | string>((resolve) => {
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", (err: NodeJS.ErrnoException) => resolve(String(err.code)));
      req.flushHeaders();
    });
    req.destroy();
    t.is(status, 413);
    t.is((await s.c.db.query("SELECT id FROM github_deliveries WHERE id = ?", [overId])).length, 0);
  },
);

test.serial(
  "github - a push to the deploy branch deploys the commit through Caddy and reports success on the commit",
  async (t) => {
    const linked = await s.manage(s.appPath(app.id, "/github-repository"), {
      method: "PUT",
      body: { repository_id: REPO_ID },
    });
    t.is(linked.status, 200, describe(linked));
    t.like(linked.json, { repository_id: REPO_ID, full_name: FULL_NAME, deployable: true });
    const v2 = await repo.commitVersion("2", "Ship version 2");
    const body = JSON.stringify(pushPayload(v2.sha, { message: v2.message }));
    const d = await deliver("push", {}, { body });
    firstPush = { id: d.id, body };
    t.deepEqual([d.status, d.json.duplicate], [202, false]);
    const outcome = (await processed(d.id)).outcome as Json;
    t.is(outcome.result, "deployed", JSON.stringify(outcome));
    const deploymentId = String(outcome.deployments[0].deployment_id);
    t.like(await deliveryAudits(d.id), [
      {
        payload: {
          event: "push",
          repository_id: REPO_ID,
          result: "deployed",
          deployments: [{ application_id: app.id, deployment_id: deploymentId, commit_sha: v2.sha }],
        },
      },
    ]);
    const view = await s.deployment(app.id, deploymentId);
    t.like(view.json, { trigger: "webhook", commit_sha: v2.sha, triggered_by: { type: "github_app" } });
    const op = await s.waitOperation(String(view.json.operation_id));
    t.is(op.json.status, "completed", describe(op));
    await waitForBody(s.proxyPort, app.fqdn, "version 2");
    t.like((await s.deployment(app.id, deploymentId)).json, { commit_message: "Ship version 2" });
    // git fetched with a minted installation token, which went nowhere else.
    t.true(
      git.requests.some((r) => r.authorized),
      "git was authorised by a minted token",
    );
    t.false(git.requests.some((r) => /ghs_/.test(r.path)));
    const dump = await s.c.db.dumpText();
    const logs = s.c.logText();
    // grep exits 1 when nothing matches, 0 with the files that do.
    const inState = spawnSync("grep", ["-rl", "ghs_", s.c.agent.stateDir], { encoding: "utf8" });
    t.true(gh.minted.length > 0);
    for (const m of gh.minted) {
      t.false(dump.includes(m.token), "a minted token is stored in no table");
      t.false(logs.includes(m.token), "nor in any control-plane or agent log");
    }
    t.is(inState.status, 1, `nor in the agent's state dir (git cache config included): ${inState.stdout}`);
    const states = await pollUntil(
      async () => {
        const mine = gh.statuses.filter((x) => x.sha === v2.sha).map((x) => x.state);
        return mine.includes("success") ? mine : undefined;
      },
      { what: "success status on the stand-in", timeoutMs: 30_000 },
    );
    t.is(states[0], "pending");
    const last = gh.statuses.filter((x) => x.sha === v2.sha).at(-1)!;
    // One context per application: several applications of one repository do not overwrite each other.
    t.like(last, { full_name: FULL_NAME, context: `relayctl/${app.name}`, state: "success" });
    t.is(last.description, "deployed and serving");
    // Least privilege: every token names the one repository and only what its use needs
    // (reading the repository when linking, its contents to fetch, statuses to report).
    t.true(gh.minted.length > 0);
    for (const m of gh.minted) {
      t.true(m.narrowed, "permissions asked for, not the installation's all");
      t.deepEqual(m.repositoryIds, [REPO_ID]);
    }
    const kinds = new Set(gh.minted.map((m) => JSON.stringify(m.permissions)));
    t.deepEqual(
      [...kinds].sort(),
      [{ metadata: "read" }, { metadata: "read", contents: "read" }, { metadata: "read", statuses: "write" }]
        .map((p) => JSON.stringify(p))
        .sort(),
    );
    t.is(last.target_url, `https://relayctl.example/app/applications/${app.id}/deployments/${deploymentId}`);
    // The link is the deployment's dashboard page, served by this control plane.
    const page = await fetch(`${s.c.baseUrl}${new URL(String(last.target_url)).pathname}`);
    t.is(page.status, 200);
    t.regex(page.headers.get("content-type") ?? "", /text\/html/);
  },
);

test.serial(
  "github - one deployment per (application, commit); other branches, deletions and auto-deploy off deploy nothing, and say so",
  async (t) => {
    const before = await deploymentCount();
    const sha = repo.head().sha;
    const first = gh.statuses.length;
    // The same push again under a new delivery id (a second installation covering the repository, say).
    const again = await deliver("push", pushPayload(sha));
    t.regex(JSON.stringify((await processed(again.id)).outcome), /already deployed/);
    // A redelivery of one delivery id.
    const redelivered = await deliver("push", pushPayload(sha), { id: again.id });
    t.deepEqual([redelivered.status, redelivered.json.duplicate], [202, true]);
    // GitHub's "Redeliver" of the push that deployed: the same id and bytes, recorded and acted on once.
    const redeploy = await deliver("push", {}, firstPush);
    t.deepEqual([redeploy.status, redeploy.json.duplicate], [202, true]);
    const rows = await s.c.db.query<Json>("SELECT outcome FROM github_deliveries WHERE id = ?", [
      firstPush.id,
    ]);
    t.is(rows.length, 1);
    t.like(JSON.parse(String(rows[0]!.outcome)), { result: "deployed" });
    const other = await deliver("push", pushPayload("a".repeat(40), { ref: "refs/heads/feature" }));
    t.regex(
      JSON.stringify((await processed(other.id)).outcome),
      /push to 'feature'; the application deploys 'main'/,
    );
    const deletion = await deliver("push", pushPayload(sha, { deleted: true }));
    t.regex(JSON.stringify((await processed(deletion.id)).outcome), /deleted: a deletion deploys nothing/);
    const off = await s.manage(`/applications/${app.id}`, { method: "PATCH", body: { auto_deploy: false } });
    t.is(off.status, 200, describe(off));
    const whileOff = await deliver("push", pushPayload("b".repeat(40)));
    t.like((await processed(whileOff.id)).outcome, {
      result: "nothing",
      skipped: [{ reason: "auto_deploy is off" }],
    });
    await s.manage(`/applications/${app.id}`, { method: "PATCH", body: { auto_deploy: true } });
    t.is(await deploymentCount(), before);
    t.is(gh.statuses.length, first, "nothing deployed, nothing reported");
  },
);

test.serial(
  "github - pushes in quick succession deploy the newest commit; a queued older one is superseded",
  async (t) => {
    const v3 = await repo.commitVersion("3");
    const v4 = await repo.commitVersion("4");
    const v5 = await repo.commitVersion("5");
    const ids: string[] = [];
    let before = repo.commits.at(-4)!.sha;
    // The payload's commit message and author (not git's) are what a deployment
    // shows until the agent reports the commit; v4 never reaches the agent.
    const fromPayload = { name: "Pusher Four", email: "four@octo-org.example" };
    for (const c of [v3, v4, v5]) {
      const p = pushPayload(c.sha, { before, message: `${c.message} (payload)`, author: fromPayload });
      ids.push((await deliver("push", p)).id);
      before = c.sha;
    }
    const outcomes = await Promise.all(ids.map(async (id) => (await processed(id)).outcome as Json));
    const [d3, d4, d5] = outcomes.map((o) => String(o.deployments?.[0]?.deployment_id));
    const op5 = await s.waitOperation(String((await s.deployment(app.id, d5!)).json.operation_id));
    t.is(op5.json.status, "completed", describe(op5));
    await waitForBody(s.proxyPort, app.fqdn, "version 5");
    // v4 waited behind v3 (or v3 too was still waiting): the newer push replaced it.
    const view4 = (await s.deployment(app.id, d4!)).json;
    t.like(view4, { status: "failed" }, JSON.stringify(view4));
    t.regex(String(view4.error), /superseded by a newer push/);
    t.like(view4, {
      trigger: "webhook",
      commit_sha: v4.sha,
      commit_message: `${v4.message} (payload)`,
      commit_author: "Pusher Four <four@octo-org.example>",
    });
    // The v4 push delivered again late (GitHub promises no order): v5 built on it, so it is stale.
    const late = await deliver("push", pushPayload(v4.sha, { before: v3.sha }));
    t.regex(JSON.stringify((await processed(late.id)).outcome), /stale: a newer push \(/);
    const view3 = (await s.deployment(app.id, d3!)).json;
    t.true(view3.status === "completed" || /superseded/.test(String(view3.error)), JSON.stringify(view3));
    await pollUntil(
      async () => gh.statuses.some((x) => x.sha === v4.sha && x.state === "error") || undefined,
      {
        what: "the superseded commit's error status",
        timeoutMs: 30_000,
      },
    );
  },
);

test.serial(
  "github - a push deployment that fails is reported as failure on the commit; the old version keeps serving",
  async (t) => {
    const crash = await repo.commitCommand("crash", ["sh", "-c", "exit 3"], "Crash on start");
    const d = await deliver("push", pushPayload(crash.sha, { before: repo.commits.at(-2)!.sha }));
    const outcome = (await processed(d.id)).outcome as Json;
    t.is(outcome.result, "deployed", JSON.stringify(outcome));
    const deploymentId = String(outcome.deployments[0].deployment_id);
    const view = await s.deployment(app.id, deploymentId);
    const op = await s.waitOperation(String(view.json.operation_id));
    t.is(op.json.status, "failed", describe(op));
    const states = await pollUntil(
      async () => {
        const mine = gh.statuses.filter((x) => x.sha === crash.sha);
        return mine.some((x) => x.state === "failure") ? mine : undefined;
      },
      { what: "failure status on the stand-in", timeoutMs: 30_000 },
    );
    t.deepEqual(
      states.map((x) => x.state),
      ["pending", "failure"],
    );
    // A fixed sentence: the deploy's error output stays behind the link (a public repository's statuses are public).
    t.is(states[1]!.description, "the deployment failed; the link shows why");
    const failed = await s.deployment(app.id, deploymentId);
    t.truthy(failed.json.error, describe(failed));
    for (const st of gh.statuses) {
      t.false(st.description.includes(String(failed.json.error).split("\n")[0]!));
      t.regex(
        st.description,
        /^(relayctl is deploying this commit|deployed and serving|superseded by a newer push before it started|the deployment failed; the link shows why)$/,
      );
    }
    t.is(
      states[1]!.target_url,
      `https://relayctl.example/app/applications/${app.id}/deployments/${deploymentId}`,
    );
    await waitForBody(s.proxyPort, app.fqdn, "version 5");
    // Tokens are reused until shortly before they expire: one for every status so
    // far, not one per status (a deployment's fetch gets its own, a whole hour long).
    const statusTokens = gh.minted.filter((m) => m.permissions.statuses === "write");
    t.true(gh.statuses.length >= 8, `${gh.statuses.length} statuses`);
    t.is(statusTokens.length, 1, `${statusTokens.length} status tokens for ${gh.statuses.length} statuses`);
  },
);

test.serial(
  "github - an application created without a repository and linked to one gets the default build, deploys on push and reports under its own context",
  async (t) => {
    const bare = await s.createApp({ git_repository: null, build: undefined, auto_deploy: true });
    t.is(bare.created.json.build, null, describe(bare.created));
    const linked = await s.manage(s.appPath(bare.id, "/github-repository"), {
      method: "PUT",
      body: { repository_id: REPO_ID },
    });
    t.is(linked.status, 200, describe(linked));
    t.like(linked.json, { repository_id: REPO_ID, deployable: true });
    const shown = await s.manage(`/applications/${bare.id}`);
    t.deepEqual(shown.json.build, { type: "dockerfile", dockerfile: "Dockerfile", context: "." });
    t.is(shown.json.git_repository, git.url("app"));
    const v = await repo.commitVersion("5b");
    const d = await deliver("push", pushPayload(v.sha, { before: repo.commits.at(-2)!.sha }));
    const outcome = (await processed(d.id)).outcome as Json;
    t.is(outcome.result, "deployed", JSON.stringify(outcome));
    const mine = (outcome.deployments as Json[]).find((x) => x.application_id === bare.id);
    t.truthy(mine, JSON.stringify(outcome));
    const op = await s.waitOperation(
      String((await s.deployment(bare.id, String(mine!.deployment_id))).json.operation_id),
    );
    t.is(op.json.status, "completed", describe(op));
    await waitForBody(s.proxyPort, bare.fqdn, "version 5b");
    await waitForBody(s.proxyPort, app.fqdn, "version 5b");
    const contexts = await pollUntil(
      async () => {
        const done = gh.statuses.filter((x) => x.sha === v.sha && x.state === "success");
        return done.length === 2 ? done.map((x) => x.context).sort() : undefined;
      },
      { what: "both applications' success statuses", timeoutMs: 30_000 },
    );
    t.deepEqual(contexts, [`relayctl/${app.name}`, `relayctl/${bare.name}`].sort());
    const off = await s.manage(s.appPath(bare.id, "/github-repository"), { method: "DELETE" });
    t.is(off.status, 204, describe(off));
  },
);

test.serial(
  "github - a tag matching deploy_tags deploys its commit; with watch_paths a push deploys only when a changed file matches, the compare API asked when the payload's lists are cut",
  async (t) => {
    const patch = (body: Json) => s.manage(`/applications/${app.id}`, { method: "PATCH", body });
    for (const bad of [
      { deploy_tags: "v* ; rm" },
      { deploy_tags: "" },
      { watch_paths: ["/etc/**"] },
      { watch_paths: ["services/../.."] },
      { watch_paths: [] },
      { watch_paths: "services/**" },
    ]) {
      const r = await patch(bad);
      t.is(r.status, 422, `${JSON.stringify(bad)}: ${describe(r)}`);
      t.true(String(r.json.detail).startsWith(`${Object.keys(bad)[0]}`), describe(r));
    }
    const tags = await patch({ deploy_tags: "v*" });
    t.like(tags.json, { deploy_tags: "v*", watch_paths: null }, describe(tags));

    // Tags: the one matching the pattern deploys the commit it names.
    const v7 = await repo.commitVersion("7");
    const tagPush = (name: string) => {
      const p = pushPayload(v7.sha, { ref: `refs/tags/${name}`, message: v7.message });
      p.base_ref = "refs/heads/main";
      return p;
    };
    const nightly = await deliver("push", tagPush("nightly-7"));
    t.regex(
      JSON.stringify((await processed(nightly.id)).outcome),
      /tag 'nightly-7' does not match deploy_tags 'v\*'/,
    );
    const tagged = await deliver("push", tagPush("v7.0"));
    const byTag = (await processed(tagged.id)).outcome as Json;
    t.is(byTag.result, "deployed", JSON.stringify(byTag));
    t.like(byTag.deployments[0], { application_id: app.id, commit_sha: v7.sha });
    const op7 = await s.waitOperation(
      String((await s.deployment(app.id, String(byTag.deployments[0].deployment_id))).json.operation_id),
    );
    t.is(op7.json.status, "completed", describe(op7));
    await waitForBody(s.proxyPort, app.fqdn, "version 7");

    // Monorepo: only a push touching services/api/ deploys.
    const watch = await patch({ deploy_tags: null, watch_paths: ["services/api/**"] });
    t.like(watch.json, { deploy_tags: null, watch_paths: ["services/api/**"] }, describe(watch));
    const tagsOff = await deliver("push", tagPush("v7.1"));
    t.regex(JSON.stringify((await processed(tagsOff.id)).outcome), /the application deploys no tags/);
    const v8 = await repo.commitVersion("8");
    const elsewhere = pushPayload(v8.sha, { before: v7.sha });
    elsewhere.commits = [
      {
        ...elsewhere.commits[0],
        id: v8.sha,
        added: [],
        removed: [],
        modified: ["www/index.html", "README.md"],
      },
    ];
    const skipped = await deliver("push", elsewhere);
    t.like((await processed(skipped.id)).outcome, {
      result: "nothing",
      skipped: [
        {
          application_id: app.id,
          reason: "no changed file matches watch_paths (services/api/**): 2 file(s) changed",
        },
      ],
    });
    t.deepEqual(gh.compared, [], "the payload's own lists were enough");

    // A push whose payload lists GitHub's maximum of commits: the files come from the compare API.
    writeFileSync(join(repo.path, "services-api.txt"), "not under services/api/\n");
    mkdirSync(join(repo.path, "services", "api"), { recursive: true });
    writeFileSync(join(repo.path, "services", "api", "main.txt"), "the api\n");
    await repo.git(["add", "-A"]);
    await repo.git(["commit", "-q", "-m", "Change the api"]);
    const api = (await repo.git(["rev-parse", "HEAD"])).trim();
    // The head from now on (still serving version 8: www/ is unchanged).
    repo.commits.push({ sha: api, message: "Change the api", version: v8.version, broken: false });
    gh.diff = (full, base, head) =>
      full === FULL_NAME
        ? spawnSync("git", ["-C", repo.path, "diff", "--name-only", base, head], { encoding: "utf8" })
            .stdout.split("\n")
            .filter(Boolean)
        : undefined;
    const cut = pushPayload(api, { before: v8.sha, message: "Change the api" });
    cut.commits = Array.from({ length: 2048 }, (_, i) => ({
      ...elsewhere.commits[0],
      id: i === 2047 ? api : "f".repeat(40),
      modified: ["README.md"],
    }));
    const fetchMintsBefore = gh.minted.filter((m) => m.permissions.contents === "read").length;
    const viaCompare = await deliver("push", cut);
    const deployed = (await processed(viaCompare.id)).outcome as Json;
    t.is(deployed.result, "deployed", JSON.stringify(deployed));
    t.deepEqual(gh.compared, [`${FULL_NAME} ${v8.sha}...${api}`]);
    const opApi = await s.waitOperation(
      String((await s.deployment(app.id, String(deployed.deployments[0].deployment_id))).json.operation_id),
    );
    t.is(opApi.json.status, "completed", describe(opApi));
    await waitForBody(s.proxyPort, app.fqdn, "version 8");
    // The compare read contents with the cached fetch token: the only new mint is the deployment's own.
    t.is(gh.minted.filter((m) => m.permissions.contents === "read").length, fetchMintsBefore + 1);

    const back = await patch({ watch_paths: null });
    t.like(back.json, { deploy_tags: null, watch_paths: null }, describe(back));
  },
);

test.serial(
  "github - installation and repository events keep access and repository metadata in step",
  async (t) => {
    const before = await deploymentCount();
    const link = async () => (await s.manage(s.appPath(app.id, "/github-repository"))).json;
    const ours = () => ({ id: REPO_ID, name: "app", full_name: FULL_NAME, private: true });
    const installationDelivery = async (action: string) => {
      const e = example("installation", (x) => x.action === action);
      e.installation = {
        ...e.installation,
        id: INSTALLATION,
        account: { ...e.installation.account, login: "octo-org" },
      };
      if (e.repositories) e.repositories = [ours()];
      return (await processed((await deliver("installation", e)).id)).outcome as Json;
    };
    const repositoryDelivery = async (action: string, repository: Json, from = action) => {
      const e = example("repository", (x) => x.action === from);
      e.action = action;
      e.repository = repository;
      e.installation = { id: INSTALLATION };
      return (await processed((await deliver("repository", e)).id)).outcome as Json;
    };
    const stored = async (id = REPO_ID) =>
      (
        await s.c.db.query<Json>(
          "SELECT full_name, default_branch, private, archived, removed_at FROM github_repositories WHERE id = ?",
          [id],
        )
      )[0];
    const listed = async () =>
      ((await s.manage("/github/installations")).json.installations as Json[]).find(
        (i) => i.installation_id === INSTALLATION,
      )!;

    // Suspended: nothing deploys, and the link and the push say why.
    t.like(await installationDelivery("suspend"), { result: "suspended" });
    t.like(await link(), { deployable: false });
    t.regex(String((await link()).reason), /installation 31337 is suspended/);
    t.true((await listed()).suspended);
    const whileSuspended = await deliver("push", pushPayload("d".repeat(40)));
    t.regex(JSON.stringify((await processed(whileSuspended.id)).outcome), /cannot deploy: .*suspended/);
    t.like(await installationDelivery("unsuspend"), { result: "recorded" });
    t.like(await link(), { deployable: true, reason: null });
    t.false((await listed()).suspended);
    t.like(await installationDelivery("new_permissions_accepted"), { result: "recorded" });
    t.like(await link(), { deployable: true });

    // Metadata: default branch and visibility (edited), archived, transferred.
    t.like(
      await repositoryDelivery("edited", {
        ...repositoryJson(),
        default_branch: "trunk",
        private: false,
      }),
      { result: "recorded" },
    );
    t.like(await stored(), { default_branch: "trunk" });
    t.false(Boolean(Number((await stored()).private)));
    await repositoryDelivery("archived", { ...repositoryJson(), archived: true }, "edited");
    t.true(Boolean(Number((await stored()).archived)));
    await repositoryDelivery("unarchived", { ...repositoryJson(), archived: false }, "edited");
    t.like(await stored(), { default_branch: "main" });
    t.false(Boolean(Number((await stored()).archived)));
    t.true(Boolean(Number((await stored()).private)));
    t.like(await repositoryDelivery("transferred", repositoryJson("octo-team/app")), { result: "recorded" });
    t.like(await link(), { repository_id: REPO_ID, full_name: "octo-team/app", deployable: true });
    t.is((await s.manage(`/applications/${app.id}`)).json.git_repository, git.url("app"));

    // Repositories entering and leaving the installation.
    const added = example("installation_repositories", (e) => e.action === "added");
    added.installation = { ...added.installation, id: INSTALLATION };
    added.repositories_added = [{ id: 4242, name: "other", full_name: "octo-org/other", private: false }];
    added.repositories_removed = [];
    await processed((await deliver("installation_repositories", added)).id);
    t.like(await repositoryDelivery("created", { ...repositoryJson("octo-org/fresh"), id: 4343 }), {
      result: "recorded",
    });
    const names = async () => ((await listed()).repositories as Json[]).map((r) => r.full_name).sort();
    t.deepEqual(await names(), ["octo-org/fresh", "octo-org/other", "octo-team/app"]);
    t.like(
      await repositoryDelivery("deleted", { ...repositoryJson("octo-org/fresh"), id: 4343 }, "created"),
      {
        result: "deleted",
      },
    );
    t.not((await stored(4343)).removed_at, null);
    t.deepEqual(await names(), ["octo-org/other", "octo-team/app"]);
    t.is(await deploymentCount(), before, "none of this deployed anything");
  },
);

test.serial(
  "github - a delivery whose processing fails is shown to its tenant with the error, retried, and audited when given up",
  async (t) => {
    // A stored delivery that cannot be processed (its record is not gzip):
    // one on its first attempt, one on its last.
    const insert = async (attempts: number) => {
      const id = randomUUID();
      await s.c.db.query(
        "INSERT INTO github_deliveries (id, event, action, installation_id, repository_id, payload_gz, status, attempts, received_at) VALUES (?, 'push', NULL, ?, ?, ?, 'pending', ?, ?)",
        [id, INSTALLATION, REPO_ID, Buffer.from("not gzip"), attempts, Date.now()],
      );
      return id;
    };
    const retried = await insert(0);
    const seen = await deliveryWhen(
      retried,
      'outcome LIKE \'%"result":"error"%\'',
      "the failing delivery shown to its tenant",
    );
    t.like(seen, { status: "processing" });
    t.regex(String(seen.outcome.detail), /processing failed \(attempt \d of 5, retried later\)/);
    await s.c.db.query("DELETE FROM github_deliveries WHERE id = ?", [retried]);

    const givenUp = await insert(4);
    const d = await processed(givenUp);
    t.like(d, { status: "failed", attempts: 5, outcome: { result: "error" } });
    t.regex(String(d.outcome.detail), /attempt 5 of 5, given up/);
    const audits = await deliveryAudits(givenUp);
    t.is(audits.length, 1, "given up once, audited once");
    t.like(audits[0], { payload: { event: "push", result: "error" } });
  },
);

test.serial(
  "github - a renamed repository keeps its application; one removed from the installation cannot deploy",
  async (t) => {
    const renamed = example("repository", (e) => e.action === "renamed");
    renamed.repository = repositoryJson("octo-org/app-renamed");
    renamed.installation = { id: INSTALLATION };
    const r = await deliver("repository", renamed);
    t.like((await processed(r.id)).outcome, { result: "recorded" });
    const link = await s.manage(s.appPath(app.id, "/github-repository"));
    t.like(link.json, { repository_id: REPO_ID, full_name: "octo-org/app-renamed", deployable: true });
    t.is((await s.manage(`/applications/${app.id}`)).json.git_repository, git.url("app-renamed"));
    // Still found by id: the head commit's push is recognised as deployed already.
    const push = await deliver("push", pushPayload(repo.head().sha));
    t.regex(JSON.stringify((await processed(push.id)).outcome), /already deployed/);

    const removed = example("installation_repositories", (e) => e.action === "removed");
    removed.installation = { ...removed.installation, id: INSTALLATION };
    removed.repositories_removed = [
      { id: REPO_ID, name: "app-renamed", full_name: "octo-org/app-renamed", private: true },
    ];
    const rm = await deliver("installation_repositories", removed);
    await processed(rm.id);
    const after = await s.manage(s.appPath(app.id, "/github-repository"));
    t.like(after.json, { deployable: false });
    t.regex(String(after.json.reason), /removed from the GitHub App installation/);
    const v6 = await repo.commitVersion("6");
    const p6 = await deliver("push", pushPayload(v6.sha));
    t.regex(JSON.stringify((await processed(p6.id)).outcome), /cannot deploy: .*removed/);
    const manual = await s.dashboardDeploy(app.id);
    t.is(manual.status, 422, describe(manual));
    await waitForBody(s.proxyPort, app.fqdn, "version 8");
  },
);

test.serial(
  "github - after an uninstall the link and a push say the App was uninstalled; a push naming no installation says so",
  async (t) => {
    const deleted = example("installation", (e) => e.action === "deleted");
    deleted.installation = {
      ...deleted.installation,
      id: INSTALLATION,
      account: { ...deleted.installation.account, login: "octo-org" },
    };
    const gone = await deliver("installation", deleted);
    t.deepEqual([gone.status, gone.json.duplicate], [202, false], JSON.stringify(gone.json));
    t.like((await processed(gone.id)).outcome, { result: "deleted" });
    const link = await s.manage(s.appPath(app.id, "/github-repository"));
    t.like(link.json, { deployable: false });
    t.regex(String(link.json.reason), /the GitHub App was uninstalled \(installation 31337\)/);
    // A new message: the same body as the last test's push would be a replay.
    const push = await deliver("push", pushPayload(repo.head().sha, { message: "after the uninstall" }));
    const outcome = JSON.stringify((await processed(push.id)).outcome);
    t.regex(outcome, /cannot deploy: the GitHub App was uninstalled/);
    t.notRegex(outcome, /removed from the GitHub App installation/);

    const stray = pushPayload("e".repeat(40));
    stray.installation = undefined; // dropped by JSON.stringify: no installation object at all
    // No installation, so no tenant to show it to: read from the table.
    const strayId = (await deliver("push", stray)).id;
    const row = await pollUntil(
      async () =>
        (
          await s.c.db.query<Json>("SELECT outcome FROM github_deliveries WHERE id = ? AND status = 'done'", [
            strayId,
          ])
        )[0],
      { what: "the stray push processed", timeoutMs: 30_000 },
    );
    const said = JSON.parse(String(row.outcome));
    t.is(said.result, "ignored");
    t.regex(said.detail, /names no GitHub App installation/);
    t.notRegex(said.detail, /NaN/);
  },
);

test.serial("github - a delivery an api took and died with is processed by the next one", async (t) => {
  // What a crash between recording (or claiming) and finishing leaves: the row,
  // claimed by a process that is gone. Written here while no api runs.
  await s.c.api.stop("SIGKILL");
  const id = randomUUID();
  const body = JSON.stringify(pushPayload("c".repeat(40), { ref: "refs/heads/feature" }));
  await s.c.db.query(
    "INSERT INTO github_deliveries (id, event, action, installation_id, repository_id, payload_gz, status, attempts, claimed_until, received_at) VALUES (?, 'push', NULL, ?, ?, ?, 'processing', 1, ?, ?)",
    [id, INSTALLATION, REPO_ID, gzipSync(body), Date.now() - 1, Date.now()],
  );
  await s.c.api.start();
  s.c.baseUrl = s.c.api.apiUrl; // the api came back on another port
  const d = await processed(id);
  t.like(d, { status: "done", attempts: 2, outcome: { result: "nothing" } });
});
