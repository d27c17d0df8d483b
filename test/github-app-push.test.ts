// Push-to-deploy with the GitHub App, against a running control plane (api and gateway processes,
// MariaDB, NATS), a podman agent and Caddy, with GitHub's API stood in for (harness/github-app.ts):
// a push to the deploy branch deploys through Caddy and is reported on the commit with narrowed,
// reused installation tokens; one deployment per (application, commit); quick pushes supersede
// queued ones; a failed deployment is reported as failure; an application linked without a
// repository of its own reports under its own context. The installation is bound before the
// tests (the setup URL's own flow is github-app.test.ts's); the first test links the application.
import { spawnSync } from "node:child_process";
import test from "ava";
import { describe } from "./harness/assertions";
import {
  FULL_NAME,
  type Json,
  REPO_ID,
  app,
  deliver,
  deliveryAudits,
  deploymentCount,
  gh,
  git,
  githubAppStack,
  processed,
  pushPayload,
  repo,
  s,
} from "./harness/github-app";
import { waitForBody } from "./harness/traffic";
import { pollUntil } from "./harness/wait";

githubAppStack(test, { installed: "bound" });

/** The delivery of the first push, which deployed v2. */
let firstPush: { id: string; body: string };

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
