// Previews from GitLab merge requests and Gitea pull requests, against a running control plane
// (api and gateway, MariaDB, NATS), a podman agent and Caddy, each forge a local stand-in
// (harness/forge-api.ts, set-up shared with forges.test.ts in harness/forges.ts): a request
// opened gets a preview answering at its URL from the forge's request ref and one note or
// comment with the URL and the deployment's state, edited in place on a push; closed, the
// preview is removed and the note says so. Deliveries are the forges' documented examples
// (test/fixtures/forges/), sent as each forge sends them.
import { createHmac, randomUUID } from "node:crypto";
import test from "ava";
import { describe } from "./harness/assertions";
import type { ForgeStandIn, StoredComment } from "./harness/forge-api";
import {
  GITEA_TOKEN,
  GITLAB_TOKEN,
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
import { pollUntil } from "./harness/wait";

forgeStack(test);

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
