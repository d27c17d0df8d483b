// GitLab and Gitea/Forgejo (issue 32) against a running control plane (api and
// gateway, MariaDB, NATS), a podman agent and Caddy. Each forge is a local
// stand-in (harness/forge-api.ts) that follows its documented commit-status API
// and serves the repository over git's smart HTTP to the project token only;
// deliveries are the forges' own documented examples (test/fixtures/forges/),
// with only the fields naming this test's project, refs and commits changed,
// sent as each forge sends them (GitLab's X-Gitlab-Token, Gitea's and Forgejo's
// HMAC-SHA256 over the raw body). This file: connections (API and CLI) and pushes;
// merge and pull requests' previews are forges-previews.test.ts's (set-up shared in
// harness/forges.ts).
import { createHash, createHmac, randomUUID } from "node:crypto";
import test from "ava";
import { describe } from "./harness/assertions";
import { CliUser } from "./harness/cli";
import {
  GITEA_TOKEN,
  GITLAB_TOKEN,
  type Json,
  connect,
  deploymentsOf,
  fixture,
  forgeStack,
  gitea,
  gitlab,
  linkedApp,
  processed,
  repo,
  s,
  send,
  statusesUntilFinal,
} from "./harness/forges";
import { waitForBody } from "./harness/traffic";

const ZERO = "0000000000000000000000000000000000000000";

forgeStack(test);

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
