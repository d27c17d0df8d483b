// The deployment tests' own fixtures, checked on their own so a failing
// deployment test points at relayctl and not at its harness: the test web app's
// repository builds FROM the local busybox image and serves its version and its
// env; the smart-HTTP git host demands Basic auth and serves a real clone; the
// registry demands its password and is reachable over plain http through the
// registries.conf an agent gets.
import { randomBytes } from "node:crypto";
import { execFile } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { promisify } from "node:util";
import test from "ava";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { podman, podmanAgentEnv, publishOnFreePort } from "./harness/containers";
import { APP_PORT, type AppRepo, createAppRepo } from "./harness/git-repo";
import { startGitHttp } from "./harness/git-http";
import { startRegistry } from "./harness/registry";
import { waitForBody } from "./harness/traffic";
import { proxyGet } from "./harness/proxy-client";

const run = promisify(execFile);
const suffix = randomBytes(3).toString("hex");
const PASSWORD = `pw-${randomBytes(12).toString("hex")}`;

let repo: AppRepo;
test.before(async () => {
  repo = await createAppRepo({ first: "1" });
});
test.after.always(cleanupAll);

/** A git child that gets the credentials the way the agent hands them: askpass, values in env. */
function askpassEnv(username: string, password: string): NodeJS.ProcessEnv {
  const dir = makeTempDir("askpass");
  const script = join(dir, "askpass.sh");
  writeFileSync(script, '#!/bin/sh\ncase "$1" in Username*) printf %s "$U";; *) printf %s "$P";; esac\n');
  chmodSync(script, 0o700);
  return {
    ...process.env,
    GIT_ASKPASS: script,
    GIT_TERMINAL_PROMPT: "0",
    GIT_CONFIG_GLOBAL: "/dev/null",
    U: username,
    P: password,
  };
}

test.serial("git repo - commits, tags and the commit record", async (t) => {
  const v2 = await repo.commitVersion("2", "Second release");
  const broken = await repo.commitBroken("3");
  await repo.tag("v2", v2.sha);
  t.is(repo.commits.length, 3);
  t.regex(v2.sha, /^[0-9a-f]{40}$/);
  t.is(await repo.git(["rev-parse", "v2"]), v2.sha);
  t.is(
    await repo.git(["log", "-1", "--format=%s|%an <%ae>", v2.sha]),
    `Second release|${repo.author.name} <${repo.author.email}>`,
  );
  t.true(broken.broken);
  t.is(repo.head().sha, broken.sha);
  t.regex(await repo.git(["show", `${broken.sha}:Dockerfile`]), /CMD \["sleep"/);
});

test.serial(
  "git repo - the image builds FROM the local base image and serves its version and env",
  async (t) => {
    const ctx = makeTempDir("ctx");
    await run("sh", ["-c", `git -C ${repo.path} archive v2 | tar -x -C ${ctx}`]);
    const image = `localhost/relayctl-test-harness-${suffix}:v2`;
    // --pull=never: the build must not need anything but the local base image.
    await podman(["build", "-q", "--pull=never", "-t", image, ctx]);
    onCleanup(() => podman(["rmi", "-f", image]).then(() => undefined));
    const name = `relayctl-test-harness-${suffix}`;
    const { args, hostPort: port } = await publishOnFreePort(APP_PORT);
    await run("podman", ["run", "-d", "--init", "--name", name, "--env", "GREETING", ...args, image], {
      env: { ...process.env, ...podmanAgentEnv, GREETING: "hello from env" },
    });
    onCleanup(() => podman(["rm", "-f", "-t", "0", name]).then(() => undefined));
    await waitForBody(port, "app.test", "version 2");
    t.is((await proxyGet(port, "app.test", "/cgi-bin/env?GREETING")).body, "hello from env");
    t.is((await proxyGet(port, "app.test", "/cgi-bin/env?NOT_SET")).body, "<unset>");
    t.is((await proxyGet(port, "app.test", "/cgi-bin/env?a;id")).body, "bad name");
  },
);

test.serial(
  "git http - a clone with the right credentials; 401 without; the password never in a URL",
  async (t) => {
    const git = await startGitHttp(dirname(repo.path), "deployer", PASSWORD);
    const url = git.url(basename(repo.path));
    const dest = join(makeTempDir("clone"), "c");
    await run("git", ["-c", "credential.helper=", "clone", "-q", url, dest], {
      env: askpassEnv("deployer", PASSWORD),
    });
    const { stdout } = await run("git", ["-C", dest, "rev-parse", "HEAD"]);
    t.is(stdout.trim(), repo.head().sha);

    const denied = await run("git", ["-c", "credential.helper=", "ls-remote", url], {
      env: askpassEnv("deployer", "wrong-password"),
    }).catch((err: { stderr: string }) => err);
    t.regex(String((denied as { stderr: string }).stderr), /Authentication failed|401/);

    t.true(git.requests.some((r) => r.status === 401 && !r.authorized));
    t.true(git.requests.some((r) => r.authorized && r.status === 200 && r.path.includes("git-upload-pack")));
    for (const r of git.requests) t.false(r.path.includes(PASSWORD), r.path);
  },
);

test.serial(
  "registry - pushes a local image; a pull needs the password and the registries.conf",
  async (t) => {
    const registry = await startRegistry("puller", PASSWORD);
    const local = `localhost/relayctl-test-harness-${suffix}:v2`;
    const ref = await registry.pushImage(local, `harness-${suffix}:v2`);
    t.is(ref, `${registry.host}/harness-${suffix}:v2`);
    const env = { ...process.env, ...podmanAgentEnv, CONTAINERS_REGISTRIES_CONF: registry.registriesConf };
    const authfile = join(makeTempDir("pull-auth"), "auth.json");
    writeFileSync(authfile, "{}");
    const anonymous = await run("podman", ["pull", "-q", "--authfile", authfile, ref], { env }).catch(
      (err: { stderr: string }) => err,
    );
    t.regex(String((anonymous as { stderr: string }).stderr), /unauthorized|authentication required/i);
    const auth = Buffer.from(`puller:${PASSWORD}`).toString("base64");
    writeFileSync(authfile, JSON.stringify({ auths: { [registry.host]: { auth } } }));
    await run("podman", ["pull", "-q", "--authfile", authfile, ref], { env });
    onCleanup(() => podman(["rmi", "-f", ref]).then(() => undefined));
    const pulled = await podman(["image", "inspect", "--format", "{{.Id}}", ref]);
    const original = await podman(["image", "inspect", "--format", "{{.Id}}", local]);
    t.is(pulled.stdout, original.stdout);
    // What the deployment tests read to tell an authenticated pull.
    t.regex(registry.proc.text(), /auth\.user\.name="?puller/);
  },
);
