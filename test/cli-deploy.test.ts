// `relayctl deploy` and `relayctl apps env` against a running control plane and an
// agent with podman: a deployment followed over its live log (--wait) that
// succeeds, one that fails (exit code 1, the failing step named), one followed
// by its id (`deploy --follow`: whole lines, each step's state once, the exit
// code of its outcome) and listed (`deployments`), and env values given on stdin
// that never show in any output.
import { randomBytes, randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { chunkyLine, commitChunkyBuild } from "./harness/chunky-build";
import { CliUser, collect, waitForStderr } from "./harness/cli";
import { type Cluster, startCluster } from "./harness/cluster";
import { podman, podmanAgentEnv, removeAppImages } from "./harness/containers";
import { createAppRepo } from "./harness/git-repo";
import { Browser, createOwner } from "./harness/people";

let c: Cluster;
let u: CliUser;
let repo: string;

test.before(async () => {
  c = await startCluster({
    serverEnv: { RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: "1" },
    agentEnv: { ...podmanAgentEnv, RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: "1" },
  });
  const owner = await createOwner(c.db.url, c.tenantId);
  const browser = new Browser(c.baseUrl);
  await browser.signIn(owner);
  u = new CliUser();
  const child = u.spawn(["login", "--url", c.baseUrl]);
  const done = collect(child);
  const [, uri] = await waitForStderr(child, /\(or open (\S+)\)/);
  await browser.answerDevice(uri, "approve");
  if ((await done).code !== 0) throw new Error("login failed");

  repo = (await createAppRepo({ first: "cli" })).path;
});
test.after.always(cleanupAll);

/** An application of the repository, its containers and images removed at the end. */
async function createApp(repoPath = repo): Promise<{ name: string; id: string }> {
  const name = `cli-shop-${randomBytes(3).toString("hex")}`;
  const r = await u.run([
    "apps",
    "create",
    name,
    "--server",
    c.serverName,
    "--container",
    name,
    "--port",
    "8080",
    "--git",
    repoPath,
    "--branch",
    "main",
    "--json",
  ]);
  if (r.code !== 0) throw new Error(`apps create: ${r.stderr}`);
  const id = String(JSON.parse(r.stdout).id);
  onCleanup(async () => {
    const { stdout } = await podman(["ps", "-aq", "--filter", `label=relayctl.application=${id}`]).catch(
      () => ({ stdout: "" }),
    );
    for (const cid of stdout.split("\n").filter(Boolean)) await podman(["rm", "-f", cid]).catch(() => {});
    await removeAppImages(id);
  });
  return { name, id };
}

test.serial("cli deploy - --wait follows the live log and exits 0 when the new version serves", async (t) => {
  const app = await createApp();
  const r = await u.run(["deploy", app.name, "--wait", "--timeout", "300"], { timeoutMs: 320_000 });
  t.is(r.code, 0, `${r.stdout}\n${r.stderr}`);
  for (const step of ["fetch", "build", "start", "health_check", "switch"])
    t.regex(r.stderr, new RegExp(`\\[${step}\\] `));
  t.regex(r.stdout, /^status\s+completed$/m);
  t.regex(r.stdout, /^container_name\s+cli-shop-/m);
  // The live log went to stdout: every log line the deployment recorded until it served is
  // there. The retire step runs after the result went out (agent deploy/retire.ts), so after
  // --wait has its answer: a CI run recorded its line just after the CLI ended.
  const deploymentId = /^deployment_id\s+(\S+)$/m.exec(r.stdout)![1];
  const logged = await c.db.query(
    "SELECT log FROM deployment_progress WHERE deployment_id = ? AND step <> 'retire' AND log IS NOT NULL AND log <> '' ORDER BY seq",
    [deploymentId],
  );
  t.true(logged.length > 0, "the deployment logged something");
  for (const row of logged) t.true(r.stdout.includes(String(row.log).trimEnd()), String(row.log));
  // What it says serves the new version does: the container answers on its host port.
  const port = /^host_port\s+(\d+)$/m.exec(r.stdout)?.[1];
  t.truthy(port, r.stdout);
  const page = await fetch(`http://127.0.0.1:${port}/`);
  t.is(await page.text(), "version cli");
  // Recorded as the CLI's, by the person who signed in, not by a key.
  t.regex(r.stdout, /^trigger\s+cli$/m);
  const { key: apiKey } = (await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "reader"])) as {
    key: string;
  };
  const history = await fetch(`${c.baseUrl}/api/tenants/${c.tenantId}/applications/${app.id}/deployments`, {
    headers: { "x-api-key": apiKey },
  });
  const latest = ((await history.json()) as { deployments: Record<string, unknown>[] }).deployments[0]!;
  t.like(latest, { trigger: "cli", triggered_by: { type: "user" } });

  // `relayctl restart` on the container the deployment started: podman restarts it, exit 0.
  const container = /^container_name\s+(\S+)$/m.exec(r.stdout)![1];
  const startedAt = async () =>
    (await podman(["inspect", "--format", "{{.State.StartedAt}}", container])).stdout.trim();
  const before = await startedAt();
  const restarted = await u.run(["restart", c.serverName, container, "--json"]);
  t.is(restarted.code, 0, restarted.stderr);
  t.like(JSON.parse(restarted.stdout), { status: "completed", exit_code: 0 });
  t.not(await startedAt(), before, "the container was started again");
});

test.serial(
  "cli rollback - releases lists them; rollback --wait serves the previous release; apps show says so",
  async (t) => {
    const appRepo = await createAppRepo({ first: "one" });
    const app = await createApp(appRepo.path);
    const first = await u.run(["deploy", app.name, "--wait", "--json"], { timeoutMs: 320_000 });
    t.is(first.code, 0, first.stderr);
    const firstId = String(JSON.parse(first.stdout).deployment_id);
    await appRepo.commitVersion("two");
    const second = await u.run(["deploy", app.name, "--wait", "--json"], { timeoutMs: 320_000 });
    t.is(second.code, 0, second.stderr);

    const listed = await u.run(["releases", app.name, "--json"]);
    t.is(listed.code, 0, listed.stderr);
    const releases = JSON.parse(listed.stdout).releases as {
      deployment_id: string;
      live: boolean;
      image_kept: boolean;
    }[];
    t.deepEqual(
      releases.map((r) => [r.deployment_id, r.live, r.image_kept]),
      [
        [String(JSON.parse(second.stdout).deployment_id), true, true],
        [firstId, false, true],
      ],
    );
    const table = await u.run(["releases", app.name]);
    t.regex(table.stdout, new RegExp(`^${firstId}\\s+\\s+\\S+\\s+\\S+`, "m"));

    const back = await u.run(["rollback", app.name, "--wait"], { timeoutMs: 320_000 });
    t.is(back.code, 0, `${back.stdout}\n${back.stderr}`);
    t.regex(back.stderr, new RegExp(`^Rollback \\S+ of ${app.name} started\\.$`, "m"));
    t.regex(back.stdout, /^status\s+completed$/m);
    t.regex(back.stderr, /^\[fetch\] skipped$/m);
    t.regex(back.stdout, /rollback to release \S+: image \S+ is on the server; nothing to build/);
    t.notRegex(back.stdout, /building relayctl\//, "nothing was built");
    const port = /^host_port\s+(\d+)$/m.exec(back.stdout)?.[1];
    t.is(await (await fetch(`http://127.0.0.1:${port}/`)).text(), "version one");

    const shown = await u.run(["apps", "show", app.name]);
    t.regex(
      shown.stdout,
      new RegExp(
        `^live_release\\s+\\S+ \\(commit [0-9a-f]{12}, image \\S+, a rollback to ${firstId}\\) since `,
        "m",
      ),
    );
  },
);

test.serial("cli deploy - a failing deployment exits 1 naming the failed step", async (t) => {
  const app = await createApp();
  const r = await u.run(["deploy", app.name, "--ref", "no-such-branch", "--wait"], { timeoutMs: 120_000 });
  t.is(r.code, 1, `${r.stdout}\n${r.stderr}`);
  t.regex(r.stderr, /relayctl: deployment failed at fetch/);
  t.regex(r.stdout, /^status\s+failed$/m);
});

/** How many lines of `text` are exactly `line`. */
const times = (text: string, line: string) => text.split("\n").filter((l) => l === line).length;

test.serial(
  "cli deploy --follow - a started deployment says how to follow it; following streams whole lines, each step's state once; deployments lists it",
  async (t) => {
    // A build that prints long lines in pieces: chunks of its output end mid-line.
    const pieces = await createAppRepo({ first: "pieces" });
    await commitChunkyBuild(pieces, 60);
    const app = await createApp(pieces.path);
    const started = await u.run(["deploy", app.name]);
    t.is(started.code, 0, started.stderr);
    const id = /^Deployment (\S+) of \S+ started/m.exec(started.stdout)?.[1] ?? "";
    t.regex(id, /^[0-9a-f-]{36}$/, started.stdout);
    t.regex(started.stdout, new RegExp(`^Follow it: relayctl deploy ${app.name} --follow ${id}$`, "m"));
    const page = `${c.baseUrl}/app/applications/${app.id}/deployments/${id}`;
    t.true(started.stdout.includes(`\nDashboard: ${page}\n`), started.stdout);

    // Followed by its id alone (the application is looked up), to its end.
    const followed = await u.run(["deploy", "--follow", id], { timeoutMs: 320_000 });
    t.is(followed.code, 0, `${followed.stdout}\n${followed.stderr}`);
    t.regex(followed.stdout, /^status\s+completed$/m);
    t.regex(followed.stdout, new RegExp(`^deployment_id\\s+${id}$`, "m"));
    // Each step's state once, not before every piece of output.
    t.is(times(followed.stderr, "[build] running"), 1, followed.stderr);
    for (const step of ["fetch", "build", "start", "health_check", "switch"])
      t.is(times(followed.stderr, `[${step}] succeeded`), 1, followed.stderr);
    // Every line of the build whole, in order: no piece of one on a line of its own.
    const every = Array.from({ length: 60 }, (_, i) => chunkyLine(i));
    // (The engine's echo of the RUN instruction, `STEP 2/4: RUN …`, holds the pieces too.)
    const built = (out: string) =>
      out.split("\n").filter((l) => /a{20}|b{20}|c{20}/.test(l) && !l.startsWith("STEP "));
    t.deepEqual(built(followed.stdout), every);

    // Followed again once over, with the application named: the record, and exit 0 at once.
    const again = await u.run(["deploy", app.name, "--follow", id], { timeoutMs: 60_000 });
    t.is(again.code, 0, again.stderr);
    t.deepEqual(built(again.stdout), every);

    // The application's deployments: id, status, commit, trigger, age.
    const list = await u.run(["deployments", app.name]);
    t.is(list.code, 0, list.stderr);
    t.regex(list.stdout, /^DEPLOYMENT\s+STATUS\s+COMMIT\s+TRIGGER\s+AGE$/m);
    t.regex(
      list.stdout,
      new RegExp(
        `^${id}\\s+completed\\s+${(await pieces.git(["rev-parse", "HEAD"])).slice(0, 12)}\\s+cli\\s+\\d+[smhd] ago$`,
        "m",
      ),
      list.stdout,
    );

    // A deployment that fails: its follow exits 1, naming the step, like --wait.
    const bad = await u.run(["deploy", app.name, "--ref", "no-such-branch", "--json"]);
    t.is(bad.code, 0, bad.stderr);
    const badStart = JSON.parse(bad.stdout) as { deployment_id: string; dashboard_url: string };
    t.is(
      badStart.dashboard_url,
      `${c.baseUrl}/app/applications/${app.id}/deployments/${badStart.deployment_id}`,
    );
    const failed = await u.run(["deploy", app.name, "--follow", badStart.deployment_id], {
      timeoutMs: 120_000,
    });
    t.is(failed.code, 1, `${failed.stdout}\n${failed.stderr}`);
    t.regex(failed.stderr, /relayctl: deployment failed at fetch/);
    const listed = await u.run(["deployments", app.name, "--json"]);
    t.deepEqual(
      (JSON.parse(listed.stdout).deployments as { deployment_id: string; status: string }[]).map((d) => [
        d.deployment_id,
        d.status,
      ]),
      [
        [badStart.deployment_id, "failed"],
        [id, "completed"],
      ],
    );

    // An id no application has: refused (65), and a usage error without app or --follow (64).
    const unknown = await u.run(["deploy", "--follow", randomUUID()]);
    t.is(unknown.code, 65, unknown.stderr);
    t.regex(unknown.stderr, /deployment '[0-9a-f-]{36}' not found/);
    t.is((await u.run(["deploy"])).code, 64);
  },
);

test.serial("cli apps env - values come from stdin or a file and are never shown", async (t) => {
  const app = await createApp();
  const secret = `sekret-${randomBytes(8).toString("hex")}`;
  const set = await u.run(["apps", "env", "set", app.name, "DB_PASSWORD"], { input: `${secret}\n` });
  t.is(set.code, 0, set.stderr);
  t.is(set.stdout, `Set DB_PASSWORD on ${app.name} (value not shown).\n`);
  const file = join(makeTempDir("env-file"), "key");
  writeFileSync(file, "from-a-file");
  t.is((await u.run(["apps", "env", "set", app.name, "API_KEY", "--file", file])).code, 0);
  const list = await u.run(["apps", "env", "list", app.name, "--json"]);
  t.is(list.code, 0, list.stderr);
  const names = (JSON.parse(list.stdout).variables as { name: string }[]).map((v) => v.name).sort();
  t.deepEqual(names, ["API_KEY", "DB_PASSWORD"]);
  t.false(list.stdout.includes(secret));
  const unset = await u.run(["apps", "env", "unset", app.name, "API_KEY"]);
  t.is(unset.code, 0, unset.stderr);
  const again = await u.run(["apps", "env", "unset", app.name, "API_KEY"]);
  t.is(again.code, 65);
  const bad = await u.run(["apps", "env", "set", app.name, "1BAD"], { input: "x" });
  t.is(bad.code, 64);
  t.false(c.logText().includes(secret));
});
