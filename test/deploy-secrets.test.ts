// Deployments and their secrets (issue 11): an application's env values reach
// its container (read back through the app's CGI) and env_overrides apply to one
// deployment only; a private repository is fetched over smart HTTP with the
// application's git credential; the `image` build type pulls from a private
// registry with a stored registry credential. Then every value planted here is
// looked for where it must not be: the database, the audit events, the process
// logs, the deployment logs and the live log, the operation results, the agent's
// state dir (its git cache included) and the command line podman recorded.
import { randomBytes } from "node:crypto";
import { basename, dirname } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import { podman } from "./harness/containers";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type GitHttpServer, startGitHttp } from "./harness/git-http";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { assertAbsent, filesText, filesUnder, plantSecret } from "./harness/leaks";
import { proxyGet } from "./harness/proxy-client";
import { type Registry, startRegistry } from "./harness/registry";
import { readSse } from "./harness/sse";

const GIT_PASSWORD = plantSecret("gitpw");
const WRONG_GIT_PASSWORD = plantSecret("wronggitpw");
const REGISTRY_PASSWORD = plantSecret("regpw");
const APP_SECRET = plantSecret("appenv");
const OVERRIDE_SECRET = plantSecret("override");
const suffix = randomBytes(3).toString("hex");

let s: DeployStack;
let repo: AppRepo;
let git: GitHttpServer;
let repoUrl: string;
let registry: Registry;
let app: App;
let imageApp: App;
const deployments: { app: App; id: string; operationId: string }[] = [];

test.before(async () => {
  registry = await startRegistry("puller", REGISTRY_PASSWORD);
  repo = await createAppRepo({ first: "private-1" });
  git = await startGitHttp(dirname(repo.path), "deployer", GIT_PASSWORD);
  repoUrl = git.url(basename(repo.path));
  s = await startDeployStack({ registriesConf: registry.registriesConf });
});
test.after.always(cleanupAll);

const envOf = async (a: App, name: string) =>
  (await proxyGet(s.proxyPort, a.fqdn, `/cgi-bin/env?${name}`)).body;

async function deploy(a: App, body: Parameters<DeployStack["deployAndWait"]>[1] = {}) {
  const d = await s.deployAndWait(a.id, body);
  deployments.push({ app: a, id: d.deploymentId, operationId: d.operationId });
  return d;
}

test.serial("private repository - fetched over HTTP with the application's git credential", async (t) => {
  app = await s.createApp({
    git_repository: repoUrl,
    git_credential: { username: "deployer", password: GIT_PASSWORD },
  });
  t.like(app.created.json.git_credential, { username: "deployer" });
  t.false(app.created.text.includes(GIT_PASSWORD));
  const got = await s.manage(`/applications/${app.id}`);
  t.deepEqual(Object.keys(got.json.git_credential as object).sort(), ["updated_at", "username"]);

  const env = await s.setEnv(app.id, { APP_SECRET, GREETING: "hello" });
  t.is(env.status, 200, describe(env));
  t.deepEqual((env.json.variables as { name: string }[]).map((v) => v.name).sort(), [
    "APP_SECRET",
    "GREETING",
  ]);
  t.false(env.text.includes(APP_SECRET));

  const d = await deploy(app, { env_overrides: { ONCE: OVERRIDE_SECRET } });
  t.like(d.op.json, { status: "completed", result: { exit_code: 0 } }, describe(d.op));
  t.is((await proxyGet(s.proxyPort, app.fqdn)).body, "version private-1");
  t.like((await s.deployment(app.id, d.deploymentId)).json, { commit_sha: repo.head().sha });
  // The agent asked, was challenged, and came back with the credential in the header.
  t.true(git.requests.some((r) => r.status === 401 && !r.authorized));
  t.true(git.requests.some((r) => r.authorized && r.path.includes("git-upload-pack")));
  for (const r of git.requests)
    t.false(r.path.includes(GIT_PASSWORD) || r.path.includes("deployer@"), r.path);
});

test.serial("env - the application's values and the overrides reach the container", async (t) => {
  t.is(await envOf(app, "APP_SECRET"), APP_SECRET);
  t.is(await envOf(app, "GREETING"), "hello");
  t.is(await envOf(app, "ONCE"), OVERRIDE_SECRET);
  const listed = await s.manage(s.appPath(app.id, "/env"));
  t.is(listed.status, 200, describe(listed));
  for (const v of listed.json.variables as Record<string, unknown>[])
    t.deepEqual(Object.keys(v).sort(), ["name", "updated_at"]);
  t.false(listed.text.includes(APP_SECRET));
});

test.serial("env - overrides apply to one deployment; a deleted variable is gone at the next", async (t) => {
  const del = await s.manage(s.appPath(app.id, "/env/GREETING"), { method: "DELETE" });
  t.is(del.status, 204, describe(del));
  await repo.commitVersion("private-2");
  const d = await deploy(app);
  t.like(d.op.json, { status: "completed" }, describe(d.op));
  t.is((await proxyGet(s.proxyPort, app.fqdn)).body, "version private-2");
  t.is(await envOf(app, "ONCE"), "<unset>");
  t.is(await envOf(app, "GREETING"), "<unset>");
  t.is(await envOf(app, "APP_SECRET"), APP_SECRET);
});

test.serial(
  "private repository - an unknown ref or a wrong password fails at fetch; the old version serves",
  async (t) => {
    const unknown = await deploy(app, { commit_ref: "no-such-branch" });
    t.like(unknown.op.json, { status: "failed", result: { exit_code: 1 } }, describe(unknown.op));
    t.regex(String((unknown.op.json.result as Record<string, unknown>).stderr), /^fetch: .*no-such-branch/);

    const patched = await s.manage(`/applications/${app.id}`, {
      method: "PATCH",
      body: { git_credential: { username: "deployer", password: WRONG_GIT_PASSWORD } },
    });
    t.is(patched.status, 200, describe(patched));
    const refusedBefore = git.requests.filter((r) => !r.authorized).length;
    const wrong = await deploy(app);
    t.like(wrong.op.json, { status: "failed", result: { exit_code: 1 } }, describe(wrong.op));
    t.regex(String((wrong.op.json.result as Record<string, unknown>).stderr), /^fetch: /);
    t.true(
      git.requests.filter((r) => !r.authorized).length > refusedBefore,
      "the git host refused the agent",
    );
    const v = await s.deployment(app.id, wrong.deploymentId);
    t.like(v.json, { status: "failed", failed_step: "fetch" });
    t.is((await proxyGet(s.proxyPort, app.fqdn)).body, "version private-2");
  },
);

test.serial("image build - pulls from the private registry with a stored credential", async (t) => {
  const imageRepo = await createAppRepo({ first: "from-registry" });
  const local = `localhost/relayctl-test-pushed-${suffix}:1`;
  await podman(["build", "-q", "-t", local, imageRepo.path]);
  const ref = await registry.pushImage(local, `pushed-${suffix}:1`);
  // A pulled image carries no relayctl labels: the stack's cleanup by label would miss it.
  onCleanup(() => podman(["rmi", "-f", ref]).then(() => undefined));
  await podman(["rmi", local]);
  // Gone locally: the deployment can only get it from the registry.
  await t.throwsAsync(podman(["image", "exists", ref]));

  const cred = await s.manage("/registry-credentials", {
    body: {
      name: `reg-${suffix}`,
      registry_url: `http://${registry.host}`,
      username: "puller",
      password: REGISTRY_PASSWORD,
    },
  });
  t.is(cred.status, 201, describe(cred));
  imageApp = await s.createApp({
    git_repository: null,
    build: { type: "image", image: ref, registry_credential_id: cred.json.id },
  });
  const d = await deploy(imageApp, { env_overrides: { ONCE: OVERRIDE_SECRET } });
  t.like(d.op.json, { status: "completed", result: { exit_code: 0 } }, describe(d.op));
  t.is((await proxyGet(s.proxyPort, imageApp.fqdn)).body, "version from-registry");
  t.is(await envOf(imageApp, "ONCE"), OVERRIDE_SECRET);
  const v = (await s.deployment(imageApp.id, d.deploymentId)).json as {
    image: string;
    steps: { name: string; status: string }[];
  };
  t.true(v.image.includes(`pushed-${suffix}:1`), v.image);
  t.like(Object.fromEntries(v.steps.map((x) => [x.name, x.status])), {
    fetch: "skipped",
    build: "succeeded",
  });
  // The registry saw the credential's user pull the manifest.
  t.regex(registry.proc.text(), /auth\.user\.name="?puller/);
});

test.serial(
  "secrets - no planted value in the database, logs, deployment logs, state dir or argv",
  async (t) => {
    const secrets = [GIT_PASSWORD, WRONG_GIT_PASSWORD, REGISTRY_PASSWORD, APP_SECRET, OVERRIDE_SECRET];
    const dump = await s.c.db.dumpText();
    for (const d of deployments) t.true(dump.includes(d.id), `the dump should hold deployment ${d.id}`);
    assertAbsent(t, dump, secrets, "the database");
    const audit = await s.c.db.query("SELECT * FROM audit_events");
    t.true(audit.length > 0);
    assertAbsent(t, JSON.stringify(audit), secrets, "audit_events");

    assertAbsent(t, s.c.logText(), secrets, "the control-plane and agent logs");
    for (const [file, text] of filesText(s.c.dir, (f) => f.endsWith(".log")))
      assertAbsent(t, text, secrets, file);

    for (const d of deployments) {
      const view = await s.deployment(d.app.id, d.id);
      t.is(view.status, 200, describe(view));
      t.true((view.json.steps as unknown[]).length > 0);
      assertAbsent(t, view.text, secrets, `deployment ${d.id}`);
      const live = await readSse(
        `${s.c.baseUrl}/api${s.appPath(d.app.id, `/deployments/${d.id}/log`)}`,
        {
          "x-api-key": s.apiKey,
        },
        10_000,
      );
      t.true(live.events.length > 0);
      assertAbsent(t, JSON.stringify(live.events), secrets, `the live log of ${d.id}`);
      const op = await s.waitOperation(d.operationId);
      assertAbsent(t, op.text, secrets, `operation ${d.operationId}`);
      const history = await s.history(d.app.id);
      assertAbsent(t, history.text, secrets, "the history");
    }

    const stateFiles = filesUnder(s.c.agent.stateDir);
    t.true(
      stateFiles.some((f) => f.includes(app.id)),
      "the agent keeps a git cache per application",
    );
    for (const [file, text] of filesText(s.c.agent.stateDir)) {
      assertAbsent(t, text, secrets, file);
      t.false(text.includes("deployer@"), `${file} holds a URL with the git user`);
    }
    // What podman recorded as the command line that created each container: the env file, never values.
    for (const a of [app, imageApp]) {
      for (const name of await s.containersOf(a.id)) {
        const argv = (await podman(["inspect", "--format", "{{json .Config.CreateCommand}}", name])).stdout;
        t.true(argv.includes("--env-file"), argv);
        assertAbsent(t, argv, secrets, `the argv of ${name}`);
      }
    }
  },
);
