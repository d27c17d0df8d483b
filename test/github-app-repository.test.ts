// A repository linked through the GitHub App, against a running control plane (api and gateway
// processes, MariaDB, NATS), a podman agent and Caddy, with GitHub's API stood in for
// (harness/github-app.ts): which pushes deploy (deploy_tags, watch_paths, the compare API when a
// payload's lists are cut), and how installation and repository events (suspension, metadata,
// repositories added and removed, a rename, an uninstall) keep access in step. The installation
// is bound and the application linked before the tests (the setup URL's own flow is
// github-app.test.ts's); the tests build on each other in order.
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import {
  FULL_NAME,
  INSTALLATION,
  type Json,
  REPO_ID,
  app,
  deliver,
  deploymentCount,
  example,
  gh,
  git,
  githubAppStack,
  processed,
  pushPayload,
  repo,
  repositoryJson,
  s,
} from "./harness/github-app";
import { waitForBody } from "./harness/traffic";
import { pollUntil } from "./harness/wait";

githubAppStack(test, { installed: "linked" });

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
