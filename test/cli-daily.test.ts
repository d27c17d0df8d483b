// The relayctl CLI's daily commands (issue 31, defect 8) against a real cluster (api,
// gateway, agent, NATS, MariaDB), run as a person runs them: `exec` in a real terminal
// (a pty) prints the remote command's output as it comes, before the command ends, and
// keeps its exit code; `ops list` needs no flag; `apps env set` takes NAME=value pairs;
// `audit` is newest first with an ACTOR column; an rca_ key given a server name says
// why names need a login; bash completion offers application and server names.
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawn as ptySpawn } from "@lydell/node-pty";
import { run } from "@relayctl/devkit";
import test from "ava";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { CLI_MAIN, CliUser } from "./harness/cli";
import { type CliStack, startCliStack } from "./harness/cli-stack";
import type { Cluster } from "./harness/cluster";
import type { Person } from "./harness/people";
import { pollUntil } from "./harness/wait";

let c: Cluster;
let owner: Person;
let login: CliStack["login"];
let u: CliUser;
const APP = `daily-${Math.random().toString(36).slice(2, 8)}`;

/** This process's environment without RELAYCTL_* (each CLI user brings its own). */
function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith("RELAYCTL_") && v !== undefined) env[k] = v;
  return env;
}

test.before(async () => {
  ({ c, owner, login } = await startCliStack());
  u = new CliUser();
  const r = await login(u);
  if (r.code !== 0) throw new Error(`login: ${r.stderr}`);
  const app = await u.run([
    "apps",
    "create",
    APP,
    "--server",
    c.serverName,
    "--container",
    "daily-web",
    "--port",
    "3000",
  ]);
  if (app.code !== 0) throw new Error(`apps create: ${app.stderr}`);
});
test.after.always(cleanupAll);

test.serial(
  "cli - exec in a terminal streams output before the command ends and keeps its exit code",
  async (t) => {
    const flag = join(makeTempDir("exec-stream"), "go");
    const term = ptySpawn(
      process.execPath,
      [
        CLI_MAIN,
        "exec",
        c.serverName,
        "--",
        `echo first-line; while [ ! -e ${flag} ]; do sleep 0.1; done; echo after-go; exit 3`,
      ],
      {
        name: "xterm",
        cols: 120,
        rows: 30,
        env: { ...baseEnv(), RELAYCTL_CONFIG_DIR: u.configDir, RELAYCTL_NO_BROWSER: "1" },
      },
    );
    let screen = "";
    let exit: number | undefined;
    term.onData((d) => {
      screen += d;
    });
    term.onExit((e) => {
      exit = e.exitCode;
    });
    onCleanup(async () => {
      if (exit === undefined) term.kill();
    });
    // The first line shows while the remote command is still waiting for the file.
    await pollUntil(() => (screen.includes("first-line") ? true : undefined), {
      timeoutMs: 30_000,
      what: `the first line on the terminal (so far: ${JSON.stringify(screen)})`,
    });
    t.is(exit, undefined, "relayctl is still running: the command has not ended");
    t.false(screen.includes("after-go"));
    t.false(existsSync(flag));
    writeFileSync(flag, "");
    await pollUntil(() => (exit !== undefined ? true : undefined), {
      timeoutMs: 30_000,
      what: "relayctl to exit",
    });
    t.is(exit, 3, screen);
    t.regex(screen, /first-line\r?\n[\s\S]*after-go\r?\n/);
    // Nothing but the command's own output (no progress noise), once each.
    t.is(screen.split("first-line").length, 2);

    // Piped (no terminal), stdout and stderr stay apart and the exit code is kept.
    const piped = await u.run(["exec", c.serverName, "--", "echo out-1; echo err-1 >&2; echo out-2; exit 5"]);
    t.is(piped.code, 5, piped.stderr);
    t.is(piped.stdout, "out-1\nout-2\n");
    t.is(piped.stderr, "err-1\n");
    // The live lines are scrubbed like the stored result: an env value never shows.
    const secret = `s3cret-${Math.random().toString(36).slice(2)}`;
    const scrubbed = await u.run(
      ["exec", c.serverName, "--env", "DAILY_SECRET", "--", 'echo "got $DAILY_SECRET"'],
      {
        env: { DAILY_SECRET: secret },
      },
    );
    t.is(scrubbed.code, 0, scrubbed.stderr);
    t.false(scrubbed.stdout.includes(secret));
    t.regex(scrubbed.stdout, /^got \S+\n$/);
  },
);

test.serial("cli - ops list with no flags lists recent operations, newest first", async (t) => {
  const ran = await u.run(["exec", c.serverName, "--", "echo listed-op"]);
  t.is(ran.code, 0, ran.stderr);
  const list = await u.run(["ops", "list"]);
  t.is(list.code, 0, list.stderr);
  t.regex(list.stdout, /^ID\s+TYPE\s+SERVER\s+STATUS\s+EXIT\s+STARTED$/m);
  const rows = list.stdout.split("\n").slice(1).filter(Boolean);
  t.true(rows.length >= 2, list.stdout);
  // The newest first: the last exec is the first row.
  t.regex(rows[0]!, new RegExp(`\\sexec\\s+${c.serverName}\\s+completed\\s+0\\s`));
  const json = await u.run(["ops", "list", "--json"]);
  const ops = JSON.parse(json.stdout).operations as { started_at: string; command: string }[];
  t.is(ops[0]!.command, "echo listed-op");
  const times = ops.map((o) => o.started_at);
  t.deepEqual(times, [...times].sort().reverse());
  // Filters: by server name and status.
  const failed = await u.run(["ops", "list", "--server", c.serverName, "--status", "timeout", "--json"]);
  t.is(failed.code, 0, failed.stderr);
  t.deepEqual(JSON.parse(failed.stdout).operations, []);
});

test.serial("cli - apps env set takes NAME=value pairs, several at once", async (t) => {
  const set = await u.run(["apps", "env", "set", APP, "LOG_LEVEL=debug", "REGION=eu-west", "GREETING=a=b c"]);
  t.is(set.code, 0, set.stderr);
  t.is(set.stdout, `Set LOG_LEVEL, REGION, GREETING on ${APP} (values not shown).\n`);
  const list = await u.run(["apps", "env", "list", APP, "--json"]);
  const names = (JSON.parse(list.stdout).variables as { name: string }[]).map((v) => v.name).sort();
  t.deepEqual(names, ["GREETING", "LOG_LEVEL", "REGION"]);
  // A NAME alone still reads its value from stdin (kept off the command line).
  const secret = await u.run(["apps", "env", "set", APP, "DB_PASSWORD"], { input: "s3cret\n" });
  t.is(secret.code, 0, secret.stderr);
  t.false(secret.stdout.includes("s3cret"));
  const bad = await u.run(["apps", "env", "set", APP, "1BAD=x"]);
  t.is(bad.code, 64);
  t.regex(bad.stderr, /'1BAD' is not a variable name/);
  const twoBare = await u.run(["apps", "env", "set", APP, "A", "B"], { input: "x" });
  t.is(twoBare.code, 64);
  t.regex(twoBare.stderr, /only one NAME can take its value from stdin/);
});

test.serial("cli - audit is newest first with the actor", async (t) => {
  const r = await u.run(["audit", "--limit", "50"]);
  t.is(r.code, 0, r.stderr);
  const [head, ...lines] = r.stdout.split("\n").filter(Boolean);
  t.regex(head!, /^SEQ\s+TIME\s+EVENT\s+ACTOR\s+OUTCOME\s+OPERATION\s+RUN$/);
  const seqs = lines.map((l) => Number(l.split(/\s+/)[0]));
  t.true(seqs.length > 5);
  t.deepEqual(
    seqs,
    [...seqs].sort((a, b) => b - a),
    "newest first",
  );
  // The env change just made is the owner's, and the newest of its kind.
  const envSet = lines.find((l) => /\sapplication\.env_set\s/.test(l));
  t.truthy(envSet, r.stdout);
  t.true(envSet!.includes(owner.email), envSet);
  // Filters: a family and the actor.
  const j = await u.run(["audit", "--type", "auth", "--actor", owner.id, "--json"]);
  t.is(j.code, 0, j.stderr);
  const events = JSON.parse(j.stdout).events as { event_type: string; actor: { name: string } }[];
  t.true(events.length > 0);
  t.true(events.every((e) => e.event_type.startsWith("auth.") && e.actor.name === owner.email));
  const old = await u.run(["audit", "--oldest-first", "--limit", "5", "--json"]);
  const oldSeqs = (JSON.parse(old.stdout).events as { seq: number }[]).map((e) => e.seq);
  t.deepEqual(oldSeqs, [1, 2, 3, 4, 5]);
});

test.serial(
  "cli - an rca_ key resolves server names in its scope; an application name says what to use",
  async (t) => {
    const k = new CliUser({ RELAYCTL_URL: c.baseUrl, RELAYCTL_TOKEN: c.key });
    // The key may not read GET /api/servers, but the Automation API names the servers it may use.
    const r = await k.run(["exec", c.serverName, "--", "echo by-name"]);
    t.is(r.code, 0, r.stderr);
    t.is(r.stdout, "by-name\n");
    const unknown = await k.run(["exec", "no-such-server", "--", "true"]);
    t.is(unknown.code, 65);
    t.is(unknown.stderr, "relayctl: server 'no-such-server' not found among the servers this key may use\n");
    // A key scoped to another server does not see this one by name.
    const other = await c.addServer({
      start: false,
      name: `other-${Math.random().toString(36).slice(2, 8)}`,
    });
    const made = await u.run([
      "keys",
      "create",
      "scoped-daily",
      "--server",
      other.serverName,
      "--operation",
      "exec",
      "--json",
    ]);
    t.is(made.code, 0, made.stderr);
    const s = new CliUser({ RELAYCTL_URL: c.baseUrl, RELAYCTL_TOKEN: String(JSON.parse(made.stdout).key) });
    const outside = await s.run(["exec", c.serverName, "--", "true"]);
    t.is(outside.code, 65, outside.stderr);
    t.regex(outside.stderr, /not found among the servers this key may use/);
    // Applications are the organization's list: the key is told what to use instead.
    const app = await k.run(["restart", APP]);
    t.is(app.code, 64);
    t.notRegex(app.stderr, /X-API-Key/);
    t.regex(
      app.stderr,
      new RegExp(
        `^relayctl: application '${APP}': an automation \\(rca_\\) key cannot look applications up by name`,
      ),
    );
    t.regex(app.stderr, /relayctl login/);
  },
);

test.serial("cli - bash completion offers application and server names, and nothing offline", async (t) => {
  const script = join(makeTempDir("completion"), "relayctl.bash");
  writeFileSync(script, (await u.run(["completion", "bash"])).stdout);
  // `relayctl` on PATH as a person has it: this build, this user's login.
  const bin = makeTempDir("bin");
  writeFileSync(join(bin, "relayctl"), `#!/bin/sh\nexec "${process.execPath}" "${CLI_MAIN}" "$@"\n`, {
    mode: 0o755,
  });
  const complete = async (env: Record<string, string>, ...words: string[]) => {
    const { stdout } = await run(
      "bash",
      [
        "-c",
        'source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _relayctl; printf "%s\\n" "${COMPREPLY[@]}"',
        script,
        "relayctl",
        ...words,
      ],
      {
        timeoutMs: 20_000,
        env: { ...baseEnv(), PATH: `${bin}:${process.env.PATH}`, RELAYCTL_CONFIG_DIR: u.configDir, ...env },
      },
    );
    return stdout.split("\n").filter(Boolean).sort();
  };
  t.true((await complete({}, "apps", "show", "")).includes(APP));
  t.deepEqual(await complete({}, "apps", "show", APP.slice(0, 7)), [APP]);
  t.true((await complete({}, "exec", "")).includes(c.serverName));
  t.false((await complete({}, "exec", "")).includes(APP), "exec takes a server");
  const both = await complete({}, "restart", "");
  t.true(both.includes(APP) && both.includes(c.serverName));
  t.true((await complete({}, "apps", "env", "set", "")).includes(APP));
  // The second argument is not a name to look up.
  t.deepEqual(await complete({}, "apps", "env", "set", APP, ""), ["--file", "--help"]);
  // An rca_ key completes the servers it may use.
  const withKey = await complete({ RELAYCTL_URL: c.baseUrl, RELAYCTL_TOKEN: c.key }, "exec", "");
  t.true(withKey.includes(c.serverName), withKey.join(" "));
  // Offline: no names, no error, quickly.
  const started = Date.now();
  t.deepEqual(await complete({ RELAYCTL_URL: "http://127.0.0.1:9" }, "apps", "show", ""), ["--help"]);
  t.true(Date.now() - started < 10_000);
});
