// The one-line agent install, end to end: the control plane serves /install.sh and the agent
// bundles (built here by scripts/agent-bundle.mjs into this file's own folder), the installer
// runs with `sh` into a scratch root (--prefix, --no-systemd: it runs as root here, but must not
// touch the real system), the unit passes `systemd-analyze verify`, and the installed agent,
// started the way the unit starts it, connects and runs a command through the API. The bundle
// carries its own Node.js: the installer runs on a PATH of the tools it names and nothing else,
// and the agent on a PATH of this machine's programs less every node. This file: one server's
// life and the join tokens the installer refuses; bundles that were tampered with and each arch's
// bundle are install-agent-bundles.test.ts's (set-up shared in harness/install-agent.ts).
import {
  existsSync,
  lstatSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { run } from "@relayctl/devkit";
import test from "ava";
import { assertCompleted } from "./harness/assertions";
import { makeTempDir } from "./harness/cleanup";
import { exec, request } from "./harness/http";
import {
  type Outcome,
  VERSION,
  apiKey,
  buildBundles,
  c,
  describe,
  dir,
  installAgentStack,
  installer,
  installerPath,
  joinToken,
  noNode,
  scratchRoot,
  serverPath,
  sh,
  tree,
} from "./harness/install-agent";
import { ManagedProcess } from "./harness/process";

const UPGRADE = `${VERSION}-upgrade.1`;

installAgentStack(test);

/**
 * A `systemctl` that records its arguments: what install.sh asks of systemd without --no-systemd
 * (this machine runs no systemd; the unit itself is checked with systemd-analyze).
 */
function fakeSystemctl(): { env: NodeJS.ProcessEnv; calls: () => string[] } {
  const bin = makeTempDir("systemctl");
  const log = join(bin, "calls.log");
  writeFileSync(join(bin, "systemctl"), `#!/bin/sh\necho "$*" >>'${log}'\n`, { mode: 0o755 });
  return {
    env: noNode(`${bin}:${installerPath}`),
    calls: () => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : []),
  };
}

/** What the installer owns under root: the tree less what the running agent writes in its state dir. */
function installed(root: string): string[] {
  const state = join("var", "lib", "relayctl-agent");
  return tree(root).filter((f) => !f.startsWith(`${state}/`) || f === join(state, "agent.json"));
}

const paths = (root: string) => ({
  opt: join(root, "opt", "relayctl-agent"),
  state: join(root, "var", "lib", "relayctl-agent"),
  unit: join(root, "etc", "systemd", "system", "relayctl-agent.service"),
});

/** The unit's ExecStart and environment, to start the agent as systemd would. */
function readUnit(unit: string): { argv: string[]; env: Record<string, string> } {
  const text = readFileSync(unit, "utf8");
  const value = (key: string) => [...text.matchAll(new RegExp(`^${key}=(.*)$`, "gm"))].map((m) => m[1]!);
  const env: Record<string, string> = {};
  for (const e of value("Environment")) env[e.slice(0, e.indexOf("="))] = e.slice(e.indexOf("=") + 1);
  for (const file of value("EnvironmentFile")) {
    const path = file.replace(/^-/, "");
    if (!existsSync(path)) continue;
    for (const line of readFileSync(path, "utf8").split("\n")) {
      const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
      if (m) env[m[1]!] = m[2]!;
    }
  }
  const [execStart] = value("ExecStart");
  return { argv: execStart!.split(" "), env };
}

let agentRuns = 0;
async function startInstalledAgent(root: string): Promise<ManagedProcess> {
  const { argv, env } = readUnit(paths(root).unit);
  const proc = new ManagedProcess({
    name: `installed-agent#${++agentRuns}`,
    command: argv[0]!,
    args: argv.slice(1),
    // A server without Node.js: the unit's ExecStart must bring its own.
    env: { ...noNode(serverPath), ...env },
    logFile: join(dir, `installed-agent-${agentRuns}.log`),
  });
  await proc.waitForMsg("connected", { timeoutMs: 30_000 });
  return proc;
}

function enrolled(root: string): { server_id: string; agent_credential: string } {
  return JSON.parse(readFileSync(join(paths(root).state, "agent.json"), "utf8"));
}

async function agentVersion(serverId: string): Promise<unknown> {
  const res = await request(c, "/api/servers", { key: null, headers: { "X-API-Key": apiKey } });
  const servers = res.json.servers as { id: string; agent_version: string }[];
  return servers.find((s) => s.id === serverId)?.agent_version;
}

// One server's life, in order: install, run a command, run the installer again, upgrade and
// re-enroll, uninstall.
const main = { root: "", token: "", agent: undefined as ManagedProcess | undefined };

test.serial(
  "install - the served script installs, enrolls, and the agent it installed runs a command",
  async (t) => {
    t.regex(readFileSync(installer, "utf8"), new RegExp(`^base_url='${c.baseUrl}'`, "m"));
    main.root = scratchRoot("root");
    main.token = await joinToken();
    const out = await sh(["--token", main.token, "--prefix", main.root, "--no-systemd"]);
    t.is(out.code, 0, describe(out));
    t.notRegex(out.stdout + out.stderr, /rjt_/, "the join token is never printed");

    const p = paths(main.root);
    t.is(readlinkSync(join(p.opt, "current")), VERSION);
    const installedDir = join(p.opt, VERSION);
    t.true(
      existsSync(join(installedDir, "node_modules", "@lydell", `node-pty-linux-${process.arch}`, "pty.node")),
    );
    t.regex(
      readFileSync(p.unit, "utf8"),
      new RegExp(`^ExecStart=${p.opt}/current/bin/relayctl-agent run$`, "m"),
    );
    t.is(statSync(join(p.state, "agent.json")).mode & 0o777, 0o600);
    t.is(statSync(p.state).mode & 0o777, 0o700);

    const unit = readFileSync(p.unit, "utf8");
    for (const line of [
      "User=relayctl-agent",
      "NoNewPrivileges=yes",
      "ProtectSystem=full",
      "ProtectHome=yes",
      "PrivateTmp=yes",
    ]) {
      t.regex(unit, new RegExp(`^${line}$`, "m"));
    }
    // systemd's own check: unknown keys, bad values and a missing ExecStart binary all show here.
    const verify = await run("systemd-analyze", ["verify", p.unit]).catch((err: Outcome & Error) => err);
    t.is((verify as Outcome).stderr.trim(), "", "systemd-analyze verify finds nothing to say");

    main.agent = await startInstalledAgent(main.root);
    // The agent is the bundle's Node.js (the launcher execs it), not any node of this machine.
    t.is(realpathSync(`/proc/${main.agent.pid}/exe`), join(installedDir, "node", "bin", "node"));
    const { server_id } = enrolled(main.root);
    const res = await exec(c, {
      server_id,
      command: "command -v node || echo installed-without-node-$((6*7))",
      timeout_seconds: 30,
    });
    assertCompleted(t, res, { exit_code: 0, stdout: "installed-without-node-42\n", stderr: "" });
    t.is(await agentVersion(server_id), VERSION);
  },
);

test.serial(
  "install - running it again keeps the install, the credential and the running agent",
  async (t) => {
    const before = enrolled(main.root);
    const files = installed(main.root);
    const systemctl = fakeSystemctl();
    const out = await sh(["--prefix", main.root], systemctl.env);
    t.is(out.code, 0, describe(out));
    // Nothing changed: the unit is started if stopped, never restarted (that would cut commands).
    t.deepEqual(systemctl.calls(), [
      "daemon-reload",
      "enable relayctl-agent.service",
      "start relayctl-agent.service",
    ]);
    t.regex(out.stdout, /already unpacked/);
    t.regex(out.stdout, /already enrolled/);
    t.deepEqual(enrolled(main.root), before);
    t.deepEqual(installed(main.root), files);
    const res = await exec(c, {
      server_id: before.server_id,
      command: "echo still-here",
      timeout_seconds: 30,
    });
    assertCompleted(t, res, { exit_code: 0, stdout: "still-here\n", stderr: "" });
  },
);

test.serial(
  "install - a used join token stops clearly and leaves an existing install as it was",
  async (t) => {
    const before = enrolled(main.root);
    const files = installed(main.root);
    // The token of the first install, used by it.
    const out = await sh(["--token", main.token, "--prefix", main.root, "--no-systemd"]);
    t.is(out.code, 1, describe(out));
    t.regex(out.stderr, /enrollment refused \(HTTP 401\): join token is invalid, already used or expired/);
    t.regex(out.stderr, /nothing was installed/);
    t.deepEqual(enrolled(main.root), before);
    t.deepEqual(installed(main.root), files);
  },
);

test.serial("install - an expired join token stops clearly and leaves nothing behind", async (t) => {
  const name = `expired-${Math.random().toString(36).slice(2, 8)}`;
  const token = await joinToken(name);
  // Tokens live at least a minute; age this one instead of waiting.
  await c.db.query("UPDATE join_tokens SET expires_at = ? WHERE server_name = ?", [Date.now() - 1000, name]);
  const root = scratchRoot("expired");
  const out = await sh(["--token", token, "--prefix", root, "--no-systemd"]);
  t.is(out.code, 1, describe(out));
  t.regex(out.stderr, /join token is invalid, already used or expired/);
  t.regex(out.stderr, /rolled back/);
  t.deepEqual(tree(root), [], "the scratch root is as empty as before");
});

test.serial(
  "install - an upgrade with a new join token switches `current`, re-enrolls, keeps the last version",
  async (t) => {
    await buildBundles(UPGRADE);
    const before = enrolled(main.root);
    const systemctl = fakeSystemctl();
    const out = await sh(["--token", await joinToken(), "--prefix", main.root], systemctl.env);
    t.is(out.code, 0, describe(out));
    t.true(systemctl.calls().includes("restart relayctl-agent.service"), systemctl.calls().join("; "));
    const p = paths(main.root);
    t.is(readlinkSync(join(p.opt, "current")), UPGRADE);
    t.true(lstatSync(join(p.opt, VERSION)).isDirectory(), "the version before stays, to go back by hand");
    t.not(enrolled(main.root).agent_credential, before.agent_credential, "a new credential");

    await main.agent!.stop("SIGTERM");
    main.agent = await startInstalledAgent(main.root);
    const { server_id } = enrolled(main.root);
    t.is(await agentVersion(server_id), UPGRADE);
    const res = await exec(c, { server_id, command: "echo upgraded", timeout_seconds: 30 });
    assertCompleted(t, res, { exit_code: 0, stdout: "upgraded\n", stderr: "" });
  },
);

test.serial("install - --uninstall leaves nothing in the scratch root", async (t) => {
  await main.agent!.stop("SIGTERM");
  const systemctl = fakeSystemctl();
  const out = await sh(["--uninstall", "--prefix", main.root], systemctl.env);
  t.is(out.code, 0, describe(out));
  t.deepEqual(systemctl.calls(), ["disable --now relayctl-agent.service", "daemon-reload"]);
  t.regex(out.stdout, /revoke-agent/);
  t.deepEqual(tree(main.root), []);
});
