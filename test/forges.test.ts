// GitLab and Gitea/Forgejo (issue 32) against a running control plane (api and
// gateway, MariaDB, NATS), a podman agent and Caddy. Each forge is a local
// stand-in (harness/forge-api.ts) that follows its documented commit-status API
// and serves the repository over git's smart HTTP to the project token only;
// deliveries are the forges' own documented examples (test/fixtures/forges/),
// with only the fields naming this test's project, refs and commits changed,
// sent as each forge sends them (GitLab's X-Gitlab-Token, Gitea's and Forgejo's
// HMAC-SHA256 over the raw body).
import { createHash, createHmac, randomBytes, randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { CliUser } from "./harness/cli";
import { type ForgeStandIn, type StoredComment, startForgeStandIn } from "./harness/forge-api";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { waitForBody } from "./harness/traffic";
import { pollUntil } from "./harness/wait";

// biome-ignore lint/suspicious/noExplicitAny: fixtures are read and edited field by field
type Json = Record<string, any>;
const ZERO = "0000000000000000000000000000000000000000";
const GITLAB_TOKEN = `glpat-${randomBytes(10).toString("hex")}`;
const GITEA_TOKEN = randomBytes(20).toString("hex");
const fixture = (name: string): Json =>
  JSON.parse(readFileSync(join(__dirname, "fixtures", "forges", name), "utf8")) as Json;

let s: DeployStack;
let repo: AppRepo;
let gitlab: ForgeStandIn;
let gitea: ForgeStandIn;

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

async function connect(kind: string, baseUrl: string, token: string) {
  const res = await s.manage("/forges", {
    body: { kind, name: `${kind}-${randomUUID().slice(0, 6)}`, base_url: baseUrl, api_token: token },
  });
  if (res.status !== 201) throw new Error(`POST /api/forges: ${describe(res)}`);
  return { id: String(res.json.id), secret: String(res.json.webhook_secret), created: res };
}

/** An application with no source and no build, linked to a forge project (the link gives it both). */
async function linkedApp(connectionId: string, project: string): Promise<App> {
  const app = await s.createApp({ auto_deploy: true, git_repository: null, build: undefined });
  const res = await s.manage(`/applications/${app.id}/forge-repository`, {
    method: "PUT",
    body: { connection_id: connectionId, project },
  });
  if (res.status !== 200) throw new Error(`PUT forge-repository: ${describe(res)}`);
  return app;
}

async function send(path: string, headers: Record<string, string>, body: string) {
  const res = await fetch(`${s.c.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : {}) as Json };
}

/** The tenant's view of a delivery once processed (polling the database, then the API). */
async function processed(connectionId: string, id: string): Promise<Json> {
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

const deploymentsOf = async (appId: string) =>
  s.c.db.query<{ id: string; operation_id: string }>(
    "SELECT id, operation_id FROM deployments WHERE application_id = ? ORDER BY seq",
    [appId],
  );

async function statusesUntilFinal(forge: ForgeStandIn, sha: string) {
  return pollUntil(
    () => {
      const mine = forge.statuses.filter((x) => x.sha === sha);
      return mine.some((x) => ["success", "failed", "failure", "error"].includes(x.state)) ? mine : undefined;
    },
    { what: `a final commit status for ${sha.slice(0, 12)}`, timeoutMs: 180_000 },
  );
}

test.serial(
  "forges - a connection shows its webhook secret once and keeps it and the token out of every answer; an application links by project path or GitLab's numeric id",
  async (t) => {
    const c = await connect("gitlab", gitlab.url, GITLAB_TOKEN);
    t.regex(c.secret, /^[0-9a-f]{64}$/);
    t.is(c.created.json.webhook_url, `https://relayctl.example/webhooks/gitlab/${c.id}`);
    const listed = await s.manage("/forges");
    t.is(listed.status, 200);
    t.false(listed.text.includes(c.secret), "the secret is shown once");
    t.false(listed.text.includes(GITLAB_TOKEN), "the token is never shown");
    const one = await s.manage(`/forges/${c.id}`);
    t.is(one.json.kind, "gitlab");
    // Stored: GitLab's secret as its SHA-256 only, the token sealed.
    const [row] = await s.c.db.query<Json>("SELECT * FROM forge_connections WHERE id = ?", [c.id]);
    t.is(row!.webhook_secret_sha256, createHash("sha256").update(c.secret).digest("hex"));
    t.is(row!.webhook_secret_sealed, null);
    t.false(String(row!.api_token_sealed).includes(GITLAB_TOKEN));
    // Bad input: the right status and a detail, never a 500.
    for (const [body, status] of [
      [{ kind: "bitbucket", name: "x", base_url: gitlab.url, api_token: "t" }, 422],
      [{ kind: "gitea", name: "x", base_url: "ftp://gitea.example", api_token: "t" }, 422],
      [{ kind: "gitea", name: "x", base_url: "https://user:pw@gitea.example", api_token: "t" }, 422],
    ] as const) {
      const res = await s.manage("/forges", { body });
      t.is(res.status, status, describe(res));
      t.truthy(res.json.detail);
    }
    const plain = await s.manage("/forges", {
      body: {
        kind: "gitea",
        name: `lan-${randomUUID().slice(0, 6)}`,
        base_url: "http://gitea.lan/",
        api_token: "t",
      },
    });
    t.is(plain.status, 201);
    t.regex(String(plain.json.warning), /unencrypted/);
    t.is(plain.json.base_url, "http://gitea.lan");
    t.is((await s.manage(`/forges/${randomUUID()}`)).status, 404);
    // GitLab's numeric project id: GitLab (asked with the token) names the path and clone URL.
    gitlab.projectIds.set(4242, "acme/web/app");
    const app = await s.createApp({ git_repository: null, build: undefined });
    const byId = await s.manage(`/applications/${app.id}/forge-repository`, {
      method: "PUT",
      body: { connection_id: c.id, project: "4242" },
    });
    t.is(byId.status, 200, describe(byId));
    t.is(byId.json.path, "acme/web/app");
    t.is(byId.json.clone_url, `${gitlab.url}/acme/web/app.git`);
    for (const project of ["4243", "../etc", "no-slash", "a//b"]) {
      const bad = await s.manage(`/applications/${app.id}/forge-repository`, {
        method: "PUT",
        body: { connection_id: c.id, project },
      });
      t.is(bad.status, 422, `${project}: ${describe(bad)}`);
    }
    t.is((await s.manage(`/applications/${app.id}/forge-repository`, { method: "DELETE" })).status, 204);
    t.is((await s.manage(`/forges/${plain.json.id}`, { method: "DELETE" })).status, 204);
  },
);

test.serial(
  "forges - a GitLab push deploys (answers through Caddy) and reports relayctl/<app> pending then success with the project token; a bad token records nothing; a redelivery deploys once",
  async (t) => {
    const c = await connect("gitlab", gitlab.url, GITLAB_TOKEN);
    const app = await linkedApp(c.id, "acme/web/app");
    // The link gave the application its clone URL and the default Dockerfile build.
    const shown = await s.manage(`/applications/${app.id}`);
    t.is(shown.json.git_repository, `${gitlab.url}/acme/web/app.git`);
    t.is((shown.json.build as Json)?.type, "dockerfile");

    const sha = repo.head().sha;
    const p = fixture("gitlab-push.json");
    p.ref = "refs/heads/main";
    p.before = ZERO;
    p.after = sha;
    p.checkout_sha = sha;
    p.project_id = 4242;
    p.project = { ...p.project, id: 4242, path_with_namespace: "acme/web/app" };
    p.commits[p.commits.length - 1].id = sha;
    p.total_commits_count = p.commits.length;
    const body = JSON.stringify(p);
    const hook = `/webhooks/gitlab/${c.id}`;
    const uuid = randomUUID();
    const headers = (token?: string, id = uuid): Record<string, string> => ({
      "x-gitlab-event": "Push Hook",
      "x-gitlab-event-uuid": id,
      ...(token === undefined ? {} : { "x-gitlab-token": token }),
    });

    // Refused before anything is recorded: no token, a wrong one, another connection's URL.
    t.is((await send(hook, headers(), body)).status, 401);
    t.is((await send(hook, headers("not-the-secret"), body)).status, 401);
    t.is((await send(`/webhooks/gitlab/${randomUUID()}`, headers(c.secret), body)).status, 401);
    t.is((await send(`/webhooks/gitea/${c.id}`, headers(c.secret), body)).status, 401);
    t.deepEqual((await s.manage(`/forges/${c.id}/deliveries`)).json.deliveries, []);
    t.is((await deploymentsOf(app.id)).length, 0);

    const first = await send(hook, headers(c.secret), body);
    t.is(first.status, 202, JSON.stringify(first.json));
    t.false(first.json.duplicate);
    const again = await send(hook, headers(c.secret), body);
    t.is(again.status, 202);
    t.true(again.json.duplicate, "the same X-Gitlab-Event-UUID is recorded once");

    const d = await processed(c.id, uuid);
    t.is(d.outcome.result, "deployed", JSON.stringify(d.outcome));
    const [dep] = await deploymentsOf(app.id);
    t.truthy(dep);
    await s.waitOperation(dep!.operation_id);
    await waitForBody(s.proxyPort, app.fqdn, "version 1");

    const posted = await statusesUntilFinal(gitlab, sha);
    t.is(posted[0]!.state, "pending");
    t.is(posted[posted.length - 1]!.state, "success");
    for (const st of posted) {
      t.is(st.context, `relayctl/${app.name}`);
      t.is(st.token, GITLAB_TOKEN);
      t.is(st.project, "acme/web/app");
      t.is(st.target_url, `https://relayctl.example/app/applications/${app.id}/deployments/${dep!.id}`);
    }
    // The fetch used the project token, over Basic auth.
    t.true(gitlab.gitRequests.some((r) => r.authorized && r.path.startsWith("/acme/web/app.git/")));

    // The same push resent under a new delivery id: recorded, and deploys nothing again.
    const resent = randomUUID();
    t.is((await send(hook, headers(c.secret, resent), body)).status, 202);
    const r = await processed(c.id, resent);
    t.is(r.outcome.result, "nothing");
    t.regex(JSON.stringify(r.outcome.skipped), /already deployed/);
    t.is((await deploymentsOf(app.id)).length, 1);

    // Each outcome is audited in the tenant's chain.
    const audit = await s.manage("/audit?limit=200");
    const events = (audit.json.events as Json[]).filter((e) => e.event_type === "forge.delivery");
    t.true(events.some((e) => e.payload.delivery_id === uuid && e.payload.result === "deployed"));
    t.true(
      (audit.json.events as Json[]).some(
        (e) => e.event_type === "forge.connection.created" && e.payload.connection_id === c.id,
      ),
    );

    // A connection in use is not removed; the answer names the application.
    const del = await s.manage(`/forges/${c.id}`, { method: "DELETE" });
    t.is(del.status, 409);
    t.true(String(del.json.detail).includes(app.name));
  },
);

test.serial(
  "forges - a Forgejo push (X-Forgejo-* headers, HMAC over the raw body) deploys and reports to its status API; a bad signature is 401 and records nothing; Gitea's headers and unknown events are recorded and ignored",
  async (t) => {
    const c = await connect("forgejo", gitea.url, GITEA_TOKEN);
    const app = await linkedApp(c.id, "acme/app");
    const before = repo.head().sha;
    const next = await repo.commitVersion("2");
    const p = fixture("gitea-push.json");
    p.ref = "refs/heads/main";
    p.before = before;
    p.after = next.sha;
    p.commits[0].id = next.sha;
    p.repository = { ...p.repository, full_name: "acme/app", name: "app" };
    const body = JSON.stringify(p);
    const sign = (b: string, secret = c.secret) => createHmac("sha256", secret).update(b).digest("hex");
    const hook = `/webhooks/gitea/${c.id}`;
    const id = randomUUID();
    const forgejo = (signature: string | null, event = "push", delivery = id): Record<string, string> => ({
      "x-forgejo-event": event,
      "x-forgejo-delivery": delivery,
      ...(signature === null ? {} : { "x-forgejo-signature": signature }),
    });

    t.is((await send(hook, forgejo(null), body)).status, 401, "no signature");
    t.is((await send(hook, forgejo(sign(body, "wrong-secret")), body)).status, 401, "another secret");
    t.is(
      (await send(hook, forgejo(sign(body)), body.replace("refs/heads/main", "refs/heads/prod"))).status,
      401,
      "tampered",
    );
    t.is((await send(hook, forgejo("zz"), body)).status, 401, "malformed");
    t.deepEqual((await s.manage(`/forges/${c.id}/deliveries`)).json.deliveries, []);
    t.is((await deploymentsOf(app.id)).length, 0);

    // The forge's status API fails the first post: it is tried again, and the deploy goes on.
    gitea.failStatuses(1);
    const ok = await send(hook, forgejo(sign(body)), body);
    t.is(ok.status, 202, JSON.stringify(ok.json));
    const d = await processed(c.id, id);
    t.is(d.outcome.result, "deployed", JSON.stringify(d.outcome));
    const [dep] = await deploymentsOf(app.id);
    await s.waitOperation(dep!.operation_id);
    await waitForBody(s.proxyPort, app.fqdn, "version 2");
    const posted = await statusesUntilFinal(gitea, next.sha);
    t.is(gitea.refusedStatuses(), 1);
    t.is(posted[0]!.state, "pending");
    t.is(posted[posted.length - 1]!.state, "success");
    for (const st of posted) {
      t.is(st.context, `relayctl/${app.name}`);
      t.is(st.token, GITEA_TOKEN);
      t.is(st.project, "acme/app");
    }

    // The signed body again under another delivery id: a replay, neither recorded nor processed.
    const replayId = randomUUID();
    const replay = await send(hook, forgejo(sign(body), "push", replayId), body);
    t.is(replay.status, 202);
    t.true(replay.json.duplicate);
    const listed = (await s.manage(`/forges/${c.id}/deliveries`)).json.deliveries as Json[];
    t.false(listed.some((x) => x.delivery_id === replayId));
    const audit = await s.manage("/audit?limit=200&event_type=forge.delivery_replayed");
    t.true(
      (audit.json.events as Json[]).some(
        (e) => e.payload.delivery_id === replayId && e.payload.replay_of === id,
      ),
    );

    // Gitea's own header names, an event relayctl does not use: 202, recorded, ignored.
    const other = JSON.stringify({ action: "opened", issue: { number: 3 }, repository: p.repository });
    const otherId = randomUUID();
    const res = await send(
      hook,
      { "x-gitea-event": "issues", "x-gitea-delivery": otherId, "x-gitea-signature": sign(other) },
      other,
    );
    t.is(res.status, 202);
    const ignored = await processed(c.id, otherId);
    t.is(ignored.outcome.result, "ignored");
    t.is((await deploymentsOf(app.id)).length, 1);
  },
);

/** Waits until the request's one comment (on the stand-in forge) contains `text`. */
async function noteSays(forge: ForgeStandIn, mine: () => StoredComment[], text: string) {
  await pollUntil(() => (mine()[0]?.body.includes(text) ? true : undefined), {
    what: `the comment saying ${JSON.stringify(text)}: ${JSON.stringify(forge.comments)}`,
    timeoutMs: 60_000,
  });
}

test.serial(
  "forges - a GitLab merge request opened gets a preview answering at its URL from refs/merge-requests/N/head and one note with the URL and the deployment's state, edited on a push; closed, the preview is removed and the note says so",
  async (t) => {
    const c = await connect("gitlab", gitlab.url, GITLAB_TOKEN);
    const app = await linkedApp(c.id, "acme/web/app");
    const on = await s.manage(`/applications/${app.id}`, {
      method: "PATCH",
      body: { previews: { enabled: true, domain_pattern: "mr-{number}.{app}.preview.test" } },
    });
    t.is(on.status, 200, describe(on));
    // The request's head lives on a branch; GitLab keeps it at refs/merge-requests/<iid>/head.
    await repo.git(["checkout", "-q", "-b", "feature"]);
    const head = await repo.commitVersion("mr");
    await repo.git(["update-ref", "refs/merge-requests/7/head", head.sha]);
    await repo.git(["checkout", "-q", "main"]);

    const mr = (action: string, sha: string, oldrev?: string) => {
      const p = fixture("gitlab-merge-request.json");
      p.project = { ...p.project, id: 4242, path_with_namespace: "acme/web/app" };
      p.object_attributes = {
        ...p.object_attributes,
        iid: 7,
        action,
        source_branch: "feature",
        target_branch: "main",
        source_project_id: 4242,
        target_project_id: 4242,
        last_commit: { ...p.object_attributes.last_commit, id: sha },
        ...(oldrev ? { oldrev } : {}),
      };
      return JSON.stringify(p);
    };
    const deliver = async (action: string, sha = head.sha, oldrev?: string) => {
      const id = randomUUID();
      const res = await send(
        `/webhooks/gitlab/${c.id}`,
        { "x-gitlab-event": "Merge Request Hook", "x-gitlab-event-uuid": id, "x-gitlab-token": c.secret },
        mr(action, sha, oldrev),
      );
      t.is(res.status, 202);
      return processed(c.id, id);
    };

    const opened = await deliver("open");
    t.is(opened.outcome.result, "deployed", JSON.stringify(opened.outcome));
    const [preview] = await s.c.db.query<{ id: string; fqdns: string }>(
      "SELECT id, fqdns FROM applications WHERE preview_of = ?",
      [app.id],
    );
    t.truthy(preview, "a preview application exists");
    const host = (JSON.parse(preview!.fqdns) as string[])[0]!;
    t.regex(host, /^mr-7\..+\.preview\.test$/);
    const [dep] = await deploymentsOf(preview!.id);
    await s.waitOperation(dep!.operation_id);
    await waitForBody(s.proxyPort, host, "version mr");
    // Reported on the request's head commit, under the preview's own context.
    const posted = await statusesUntilFinal(gitlab, head.sha);
    t.is(posted[posted.length - 1]!.state, "success");
    t.regex(posted[0]!.context, /^relayctl\/.+-pr-7$/);
    // One note on the merge request, with the preview's URL and commit, written with the
    // project token, then edited to say how the deployment went (with its page).
    const notes = () => gitlab.comments.filter((n) => n.project === "acme/web/app" && n.number === 7);
    const writes = (method: string) => gitlab.commentWrites.filter((w) => w.method === method).length;
    t.is(notes().length, 1, JSON.stringify(gitlab.comments));
    t.true(notes()[0]!.body.includes(host), notes()[0]!.body);
    t.true(notes()[0]!.body.includes(head.sha), notes()[0]!.body);
    await noteSays(
      gitlab,
      notes,
      `deployed and serving (https://relayctl.example/app/applications/${preview!.id}/deployments/${dep!.id})`,
    );
    t.is(writes("POST"), 1);
    t.true(gitlab.commentWrites.every((w) => w.token === GITLAB_TOKEN));

    // A title edit (update without oldrev) changes no code: nothing happens.
    const edited = await deliver("update");
    t.is(edited.outcome.result, "ignored");

    // A push to the request: the same note is edited (PUT), even past a forge's bad moment.
    await repo.git(["checkout", "-q", "feature"]);
    const next = await repo.commitVersion("mr2");
    await repo.git(["update-ref", "refs/merge-requests/7/head", next.sha]);
    await repo.git(["checkout", "-q", "main"]);
    gitlab.failComments(1);
    const puts = writes("PUT");
    const pushed = await deliver("update", next.sha, head.sha);
    t.is(pushed.outcome.result, "deployed", JSON.stringify(pushed.outcome));
    t.true(writes("PUT") > puts, JSON.stringify(gitlab.commentWrites));
    t.is(writes("POST"), 1);
    t.is(notes().length, 1);
    t.true(notes()[0]!.body.includes(next.sha), notes()[0]!.body);
    t.true(notes()[0]!.body.includes(host), notes()[0]!.body);
    const second = (await deploymentsOf(preview!.id)).at(-1)!;
    await s.waitOperation(second.operation_id);
    await waitForBody(s.proxyPort, host, "version mr2");
    await noteSays(gitlab, notes, `${next.sha}\nDeployment: deployed and serving`);

    const closed = await deliver("merge");
    t.is(closed.outcome.result, "removed", JSON.stringify(closed.outcome));
    t.is(notes().length, 1);
    t.regex(notes()[0]!.body, /Removed: the merge request was merged/);
    t.is(writes("POST"), 1);
    await pollUntil(
      async () =>
        (await s.c.db.query("SELECT 1 FROM applications WHERE preview_of = ?", [app.id])).length === 0 ||
        undefined,
      { what: "the preview application removed", timeoutMs: 60_000 },
    );
  },
);

test.serial(
  "forges - a Gitea pull request opened gets a preview from refs/pull/N/head and one comment with the URL and the deployment's state, edited on a push; closed, it is removed and the comment says so",
  async (t) => {
    const c = await connect("gitea", gitea.url, GITEA_TOKEN);
    const app = await linkedApp(c.id, "acme/app");
    const on = await s.manage(`/applications/${app.id}`, {
      method: "PATCH",
      body: { previews: { enabled: true, domain_pattern: "pr-{number}.{app}.preview.test" } },
    });
    t.is(on.status, 200, describe(on));
    await repo.git(["checkout", "-q", "-b", "gitea-feature"]);
    const head = await repo.commitVersion("pr");
    await repo.git(["update-ref", "refs/pull/3/head", head.sha]);
    await repo.git(["checkout", "-q", "main"]);
    const pr = (action: string, sha: string) => {
      const p = fixture("gitea-pull-request.json");
      const base = { ...p.repository, full_name: "acme/app", name: "app" };
      p.action = action;
      p.number = 3;
      p.repository = base;
      p.pull_request = {
        ...p.pull_request,
        number: 3,
        merged: false,
        head: { ...p.pull_request.head, ref: "gitea-feature", sha, repo: base },
        base: { ...p.pull_request.base, repo: base },
      };
      return JSON.stringify(p);
    };
    const deliver = async (action: string, sha = head.sha) => {
      const id = randomUUID();
      const body = pr(action, sha);
      const res = await send(
        `/webhooks/gitea/${c.id}`,
        {
          "x-gitea-event": "pull_request",
          "x-gitea-delivery": id,
          "x-gitea-signature": createHmac("sha256", c.secret).update(body).digest("hex"),
        },
        body,
      );
      t.is(res.status, 202);
      return processed(c.id, id);
    };
    const opened = await deliver("opened");
    t.is(opened.outcome.result, "deployed", JSON.stringify(opened.outcome));
    const [preview] = await s.c.db.query<{ id: string; fqdns: string }>(
      "SELECT id, fqdns FROM applications WHERE preview_of = ?",
      [app.id],
    );
    const host = (JSON.parse(preview!.fqdns) as string[])[0]!;
    const [dep] = await deploymentsOf(preview!.id);
    await s.waitOperation(dep!.operation_id);
    await waitForBody(s.proxyPort, host, "version pr");
    // One comment on the pull request (Gitea's issue comments), with the preview's URL.
    const said = () => gitea.comments.filter((n) => n.project === "acme/app" && n.number === 3);
    const writes = (method: string) => gitea.commentWrites.filter((w) => w.method === method).length;
    t.is(said().length, 1, JSON.stringify(gitea.comments));
    t.true(said()[0]!.body.includes(host), said()[0]!.body);
    await noteSays(gitea, said, `${head.sha}\nDeployment: deployed and serving`);
    t.is(writes("POST"), 1);
    t.true(gitea.commentWrites.every((w) => w.token === GITEA_TOKEN));
    // A push (synchronized): the same comment edited in place (PATCH), no second one.
    await repo.git(["checkout", "-q", "gitea-feature"]);
    const next = await repo.commitVersion("pr2");
    await repo.git(["update-ref", "refs/pull/3/head", next.sha]);
    await repo.git(["checkout", "-q", "main"]);
    const patches = writes("PATCH");
    const pushed = await deliver("synchronized", next.sha);
    t.is(pushed.outcome.result, "deployed", JSON.stringify(pushed.outcome));
    t.true(writes("PATCH") > patches, JSON.stringify(gitea.commentWrites));
    t.is(said().length, 1);
    t.true(said()[0]!.body.includes(next.sha), said()[0]!.body);
    const second = (await deploymentsOf(preview!.id)).at(-1)!;
    await s.waitOperation(second.operation_id);
    await noteSays(gitea, said, `${next.sha}\nDeployment: deployed and serving`);
    const closed = await deliver("closed", next.sha);
    t.is(closed.outcome.result, "removed", JSON.stringify(closed.outcome));
    t.is(said().length, 1);
    t.regex(said()[0]!.body, /Removed: the pull request was closed/);
    t.is(writes("POST"), 1);
    await pollUntil(
      async () =>
        (await s.c.db.query("SELECT 1 FROM applications WHERE preview_of = ?", [app.id])).length === 0 ||
        undefined,
      { what: "the preview application removed", timeoutMs: 60_000 },
    );
  },
);

test.serial(
  "forges - the CLI connects a forge with the token on stdin, lists it without secrets, links an application and cannot remove a connection in use",
  async (t) => {
    const u = new CliUser({ RELAYCTL_URL: s.c.baseUrl, RELAYCTL_TOKEN: s.apiKey });
    const name = `cli-${randomUUID().slice(0, 6)}`;
    const added = await u.run(["forges", "add", name, "--kind", "gitea", "--base-url", gitea.url, "--json"], {
      input: `${GITEA_TOKEN}\n`,
    });
    t.is(added.code, 0, added.stderr);
    const c = JSON.parse(added.stdout) as Json;
    t.regex(String(c.webhook_secret), /^[0-9a-f]{64}$/);
    const listed = await u.run(["forges", "list"]);
    t.is(listed.code, 0, listed.stderr);
    t.true(listed.stdout.includes(name));
    t.false(listed.stdout.includes(String(c.webhook_secret)));
    t.false(listed.stdout.includes(GITEA_TOKEN));
    const app = await s.createApp({ git_repository: null, build: undefined });
    const linked = await u.run([
      "apps",
      "link",
      app.name,
      "--forge",
      name,
      "--project",
      "acme/app",
      "--json",
    ]);
    t.is(linked.code, 0, linked.stderr);
    t.is((JSON.parse(linked.stdout) as Json).clone_url, `${gitea.url}/acme/app.git`);
    const refused = await u.run(["forges", "remove", name]);
    t.is(refused.code, 65, "a connection in use is refused (409)");
    t.true(refused.stderr.includes(app.name));
    t.is((await u.run(["apps", "unlink", app.name])).code, 0);
    t.is((await u.run(["forges", "remove", name])).code, 0);
  },
);
