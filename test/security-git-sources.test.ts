// Issue 30, finding 12: with RELAYCTL_ALLOW_LOCAL_GIT_SOURCES off (the default),
// git_repository refuses local paths, file:// and hosts on the loopback,
// link-local and private ranges, in every spelling the agent's resolver would
// read the same way, and nothing is stored. A name the control plane cannot judge
// (it asks no DNS) is checked by the agent when it fetches: a name that resolves
// to the loopback (DNS rebinding) fails the fetch before git sends anything.
// Every other test file runs with the allowance on (test/harness/control-plane.ts).
import { lookup } from "node:dns/promises";
import { hostname } from "node:os";
import { basename, dirname } from "node:path";
import test from "ava";
import { localAddress } from "../reverse-proxy-sync/src/git-source";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type GitHttpServer, startGitHttp } from "./harness/git-http";
import { type AppRepo, createAppRepo } from "./harness/git-repo";

let s: DeployStack;
let repo: AppRepo;
let git: GitHttpServer;

test.before(async () => {
  repo = await createAppRepo({ first: "sources-1" });
  git = await startGitHttp(dirname(repo.path), "deployer", "pw-sources");
  s = await startDeployStack({ serverEnv: { RELAYCTL_ALLOW_LOCAL_GIT_SOURCES: "false" } });
});
test.after.always(cleanupAll);

const REFUSED = [
  ["a local path", () => repo.path],
  ["file://", () => `file://${repo.path}`],
  ["another application's cache on the agent", () => `${s.c.agent.stateDir}/deploy/some-app`],
  ["the loopback", () => git.url(basename(repo.path))],
  ["localhost", () => "http://localhost:3000/x.git"],
  ["a .localhost name", () => "https://git.localhost/x.git"],
  ["IPv6 loopback", () => "http://[::1]:3000/x.git"],
  ["v4-mapped loopback", () => "http://[::ffff:127.0.0.1]/x.git"],
  ["127.1", () => "http://127.1/x.git"],
  ["a decimal loopback", () => "http://2130706433/x.git"],
  ["a hex loopback over ssh", () => "ssh://git@0x7f.0.0.1/x.git"],
  ["scp-like localhost", () => "git@localhost:org/x.git"],
  ["git:// on a private address", () => "git://10.1.2.3/x.git"],
  ["the cloud metadata address", () => "http://169.254.169.254/latest"],
  ["a private address", () => "https://192.168.1.10/org/x.git"],
  ["a unique-local IPv6 address", () => "https://[fd00::1]/x.git"],
] as const;

test.serial("create - local and private git sources are refused and nothing is stored", async (t) => {
  for (const [what, url] of REFUSED) {
    const name = `src-${Math.random().toString(36).slice(2, 8)}`;
    const res = await s.manage("/applications", {
      body: {
        name,
        server_id: s.c.serverId,
        linked_container_name: name,
        container_port: 8080,
        fqdns: [`${name}.deploy.test`],
        git_repository: url(),
      },
    });
    t.is(res.status, 422, `${what}: ${describe(res)}`);
    t.regex(String(res.json.detail), /^git_repository: .*RELAYCTL_ALLOW_LOCAL_GIT_SOURCES/, what);
    const listed = await s.manage("/applications");
    t.false(listed.text.includes(name), `${what}: the application was stored`);
  }
});

test.serial("update - a public source is kept when a local one is refused", async (t) => {
  const app = await s.createApp({ git_repository: "https://git.example.com/org/app.git" });
  const res = await s.manage(`/applications/${app.id}`, {
    method: "PATCH",
    body: { git_repository: `file://${repo.path}` },
  });
  t.is(res.status, 422, describe(res));
  const got = await s.manage(`/applications/${app.id}`);
  t.is(got.json.git_repository, "https://git.example.com/org/app.git");
});

test.serial(
  "fetch - a name that resolves to the loopback is refused by the agent; git sends nothing",
  async (t) => {
    // The machine's own name: /etc/hosts maps it to a loopback address here, as DNS rebinding would.
    const name = hostname();
    const addresses = await lookup(name, { all: true });
    t.true(
      addresses.some((a) => localAddress(a.address)),
      `${name} should resolve to a local address: ${JSON.stringify(addresses)}`,
    );
    const url = git.url(basename(repo.path)).replace("127.0.0.1", name);
    const app = await s.createApp({
      git_repository: url,
      git_credential: { username: "deployer", password: "pw-sources" },
    });
    t.is(app.created.json.git_repository, url, "the control plane asks no DNS");
    const before = git.requests.length;
    const d = await s.deployAndWait(app.id);
    t.like(d.op.json, { status: "failed" }, describe(d.op));
    const v = await s.deployment(app.id, d.deploymentId);
    t.like(v.json, { status: "failed", failed_step: "fetch" }, describe(v));
    t.regex(
      v.text,
      new RegExp(`${name} resolves to 127\\.[0-9.]+, a loopback, link-local or private address`),
    );
    t.is(git.requests.length, before, "the git server saw no request");
    t.deepEqual(await s.containersOf(app.id), []);
  },
);
