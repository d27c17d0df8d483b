// The runner's warm launchers: a pty and shell spawned ahead, handed the command
// through a FIFO. Each test takes a run that went through a launcher (runWarm
// polls until one did) and checks it behaves as a cold spawn does.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, readFile, readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import test from "ava";
import { PtyRunner, releaseFifo } from "./pty-runner.js";
import type { RunOutcome, RunRequest } from "./runner.js";

const fifoDir = join(mkdtempSync(join(tmpdir(), "relayctl-warm-")), "fifo");
const options = { shell: "/bin/bash", outputCapBytes: 1_048_576, killGraceMs: 300 };
const runner = new PtyRunner({ ...options, fifoDir });
test.after.always(() => runner.close());

const request = (command: string, more: Partial<RunRequest> = {}): RunRequest => ({
  command,
  workingDirectory: "",
  env: {},
  deadlineSeconds: 30,
  secrets: [],
  ...more,
});

/** A FIFO directory of its own, for a runner a test starts beside the shared one. */
async function newFifoDir(): Promise<string> {
  return join(await mkdtemp(join(tmpdir(), "relayctl-warm-")), "fifo");
}

/** Runs `command` until one run of it went through a ready launcher (the first may come before one is). */
function runWarm(command: string, more: Partial<RunRequest> = {}): Promise<RunOutcome> {
  return runWarmOn(runner, command, more);
}

async function runWarmOn(
  on: PtyRunner,
  command: string,
  more: Partial<RunRequest> = {},
): Promise<RunOutcome> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const before = on.stats.warm;
    const out = await on.run(request(command, more));
    if (on.stats.warm > before) return out;
    if (Date.now() > deadline) throw new Error("no run went through a warm launcher within 10 s");
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test.serial("warm launcher - output, stderr, exit code, env and working directory", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "relayctl-cwd-"));
  const out = await runWarm('echo "$GREETING|$TERM"; pwd; echo err >&2; exit 3', {
    env: { GREETING: 'it\'s "quoted" $HOME `x`' },
    workingDirectory: dir,
  });
  t.is(out.status, "completed");
  t.is(out.exitCode, 3);
  t.is(out.stdout, `it's "quoted" $HOME \`x\`|dumb\n${dir}\n`);
  t.is(out.stderr, "err\n");
});

test.serial(
  "warm launcher - a command's env does not leak into the next, each gets a new process",
  async (t) => {
    const first = await runWarm('echo "$$"; export ALSO=1', { env: { LEAK: "one", "ODD-NAME": "x" } });
    const second = await runWarm('echo "$$|${LEAK-unset}|${ALSO-unset}"; env | grep -c "^ODD-NAME=" || true');
    t.not(second.stdout.split("|")[0], first.stdout.trim(), "a new process");
    t.is(second.stdout.split("|").slice(1).join("|"), "unset|unset\n0\n");
    const odd = await runWarm('env | grep "^ODD-NAME="', { env: { "ODD-NAME": "x" } });
    t.is(odd.stdout, "ODD-NAME=x\n", "a name the shell cannot export still reaches the command");
  },
);

// What a command sees of how it was started: its shell's session, controlling
// terminal and parent, and the signals a process it starts ignores.
const ORIGIN = `set -- $(sed 's/^.*) //' /proc/$$/stat); echo "ppid=$2 sid=$4 tty=$5 tpgid=$6 pid=$$"; grep SigIgn /proc/self/status`;

/** The SIG_IGN dispositions of this process (bit n-1 for signal n), as /proc shows them. */
function ownIgnoredSignals(): bigint {
  const hex = /SigIgn:\s+(\w+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1];
  if (!hex) throw new Error("no SigIgn in /proc/self/status");
  return BigInt(`0x${hex}`);
}

function origin(stdout: string) {
  const m = /ppid=(\d+) sid=(\d+) tty=(\d+) tpgid=(-?\d+) pid=(\d+)\nSigIgn:\s+(\w+)/.exec(stdout);
  if (!m) throw new Error(`unexpected output: ${JSON.stringify(stdout)}`);
  const [ppid, sid, tty, tpgid, pid] = m.slice(1, 6).map(Number) as [number, number, number, number, number];
  return { ppid, sid, tty, tpgid, pid, ignored: m[6] };
}

test.serial(
  "warm launcher - started by the host shell, not a fork of the agent, as node-pty would",
  async (t) => {
    const out = await runWarm(ORIGIN);
    t.is(runner.launcherHostBroken, undefined);
    t.true(runner.stats.launchers.host > 0);
    t.is(runner.stats.launchers.nodePty, 0, "no launcher was forked from the agent");
    t.true(runner.stats.fifoBatches.host > 0);
    t.is(runner.stats.fifoBatches.agent, 0, "nor mkfifo");
    const hosted = origin(out.stdout);
    t.not(hosted.ppid, process.pid, "the launcher's parent is the host's shell");
    // The same command through node-pty's launchers: the same session, terminal and signals.
    const dir = await newFifoDir();
    const own = new PtyRunner({ ...options, fifoDir: dir, launcherHost: false });
    t.teardown(() => own.close());
    const forked = origin((await runWarmOn(own, ORIGIN)).stdout);
    t.is(own.stats.launchers.host, 0);
    t.true(own.stats.fifoBatches.agent > 0);
    t.is(forked.ppid, process.pid);
    for (const o of [hosted, forked]) {
      t.is(o.sid, o.pid, "the command's shell leads its own session");
      t.not(o.tty, 0, "with the pty as its controlling terminal");
      t.is(o.tpgid, o.pid, "its process group in the terminal's foreground");
    }
    t.is(hosted.ignored, forked.ignored, "no signal ignored that node-pty's launcher does not");
    // Not an absolute "nothing ignored": a SIG_IGN above 31 that this process inherited
    // survives every spawn (libuv resets 1-31 only; glibc refuses 32 and 33), and under
    // `make test` npm's `npm exec ava` has signal 32 ignored, so every test process does.
    const ignored = BigInt(`0x${hosted.ignored}`);
    t.is(ignored & ~ownIgnoredSignals(), 0n, "nothing ignored that the agent itself does not ignore");
    t.is(ignored & 0x6n, 0n, "SIGINT and SIGQUIT not ignored, as a shell's background job would have them");
  },
);

test.serial(
  "warm launcher - a host shell that ignores INT and QUIT in background jobs (dash) does not pass that on",
  async (t) => {
    // dash ignores SIGINT and SIGQUIT in the jobs it starts with & when job control is
    // off; bash, the runner's usual shell, does not, so only this shell shows the reset.
    const dir = await newFifoDir();
    const dash = new PtyRunner({ ...options, shell: "/bin/sh", fifoDir: dir });
    t.teardown(() => dash.close());
    const seen = origin((await runWarmOn(dash, ORIGIN)).stdout);
    t.true(dash.stats.launchers.host > 0, "a launcher the host shell started");
    t.is(BigInt(`0x${seen.ignored}`) & 0x6n, 0n, "SIGINT and SIGQUIT at their default");
  },
);

test.serial("warm launcher - without setsid on PATH the runner spawns launchers with node-pty", async (t) => {
  const dir = await newFifoDir();
  const path = process.env.PATH;
  process.env.PATH = dir; // the host's environment is taken now: no setsid, no env(1)
  let own: PtyRunner;
  try {
    own = new PtyRunner({ ...options, fifoDir: dir });
  } finally {
    process.env.PATH = path;
  }
  t.teardown(() => own.close());
  const out = await runWarmOn(own, 'echo "still $((40 + 2))"');
  t.is(out.stdout, "still 42\n");
  t.regex(own.launcherHostBroken ?? "", /exited 127 before it was ready/);
  t.true(own.stats.launchers.nodePty > 0);
  t.true(own.stats.fifoBatches.agent > 0, "the FIFOs too, when the host's mkfifo is not found");
});

test.serial("warm launcher - the deadline kills the whole tree", async (t) => {
  const out = await runWarm(`bash -c 'trap "" TERM HUP; echo child=$$; sleep 30' & sleep 30`, {
    deadlineSeconds: 1,
  });
  t.is(out.status, "timeout");
  const pid = Number(/child=(\d+)/.exec(out.stdout)?.[1]);
  t.true(pid > 0, `child pid in output: ${JSON.stringify(out.stdout)}`);
  await t.notThrowsAsync(waitUntil(async () => !(await alive(pid)), 5000));
});

test.serial("warm launcher - no output is lost when a command prints a lot and exits at once", async (t) => {
  const stdout = Array.from({ length: 2000 }, (_, i) => `${i + 1}\n`).join("");
  for (let i = 0; i < 30; i++) {
    const out = await runWarm("seq 1 2000; seq 1 3 >&2; exit 4");
    if (out.stdout !== stdout || out.stderr !== "1\n2\n3\n" || out.exitCode !== 4) {
      t.fail(`run ${i}: stdout ${out.stdout.length}/${stdout.length} chars, exit ${out.exitCode}`);
      return;
    }
  }
  t.pass();
});

test.serial("warm launcher - runs at once beyond those ready are spawned cold, all correct", async (t) => {
  const cold = runner.stats.cold;
  const outs = await Promise.all(
    Array.from({ length: 6 }, (_, i) => runner.run(request(`echo "run ${i} $V"`, { env: { V: `v${i}` } }))),
  );
  outs.forEach((out, i) => t.is(out.stdout, `run ${i} v${i}\n`));
  t.true(runner.stats.cold > cold);
});

test.serial("warm launcher - close kills the launchers waiting for a run", async (t) => {
  const dir = await newFifoDir();
  const own = new PtyRunner({ shell: "/bin/bash", outputCapBytes: 1000, killGraceMs: 300, fifoDir: dir });
  const waiting = () => processesMentioning(dir);
  await waitUntil(async () => (await waiting()).length > 0, 10_000);
  await own.close();
  await t.notThrowsAsync(waitUntil(async () => (await waiting()).length === 0, 5000));
});

test("warm launcher - a closed runner's host keeps no process up, whatever its shells left behind", async (t) => {
  // A shell that, started as the host, leaves a process holding the host's stdout (as a
  // launcher stuck at its FIFO would, with the subshell that waits for it).
  const dir = await mkdtemp(join(tmpdir(), "relayctl-host-"));
  const shell = join(dir, "shell");
  const left = join(dir, "left.pid");
  writeFileSync(
    shell,
    `#!/bin/bash\ncase "$2" in *"read -r line"*) sleep 120 & echo $! > '${left}' ;; esac\nexec /bin/bash "$@"\n`,
    { mode: 0o755 },
  );
  t.teardown(() => {
    if (existsSync(left)) spawnSync("kill", [readFileSync(left, "utf8").trim()]);
  });
  const runner = pathToFileURL(join(__dirname, "pty-runner.ts")).href;
  const options = { shell, outputCapBytes: 1000, killGraceMs: 300, fifoDir: join(dir, "fifo") };
  const script = `
    const { PtyRunner } = await import(${JSON.stringify(runner)});
    const runner = new PtyRunner(${JSON.stringify(options)});
    const o = await runner.run({ command: "echo ran", workingDirectory: "", env: {}, deadlineSeconds: 30, secrets: [] });
    process.stdout.write(o.stdout);
    await runner.close();
    process.stdout.write("closed\\n");`;
  const child = spawn(process.execPath, ["--import=tsx", "--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.on("data", (d) => {
    out += d;
  });
  // Well before the left-behind process ends (120 s): what it holds does not keep the process up.
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  const code = await Promise.race([exited, delay(30_000).then(() => "still running" as const)]);
  if (code === "still running") child.kill("SIGKILL");
  t.is(out, "ran\nclosed\n");
  t.is(code, 0);
  // It ended with its work: the process left behind, holding the host's stdout, still runs.
  t.true(existsSync(left));
  t.notThrows(() => process.kill(Number(readFileSync(left, "utf8").trim()), 0));
});

test("releaseFifo - a launcher blocked opening its FIFO gets an empty script and exits", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "relayctl-release-"));
  const fifo = join(dir, "launcher.fifo");
  execFileSync("mkfifo", ["-m", "600", fifo]);
  const launcher = spawn("/bin/sh", ["-c", '. "$1"; echo "sourced $?"', "relayctl", fifo]);
  let out = "";
  launcher.stdout.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<number | null>((resolve) => launcher.on("exit", resolve));
  // Blocked in the kernel's FIFO open, waiting for a writer.
  await waitUntil(
    async () =>
      (await readFile(`/proc/${launcher.pid}/wchan`, "latin1").catch(() => "")) === "wait_for_partner",
    5000,
  );
  releaseFifo(fifo);
  t.is(await exited, 0);
  t.is(out, "sourced 0\n");
  await waitUntil(async () => !existsSync(fifo), 5000);
});

test.serial("warm launcher - close leaves a run in flight to finish", async (t) => {
  const dir = await newFifoDir();
  const own = new PtyRunner({ ...options, fifoDir: dir });
  await runWarmOn(own, "true"); // a launcher is up
  await waitUntil(async () => (await processesMentioning(dir)).length > 0, 10_000);
  const warm = own.stats.warm;
  const running = own.run(request('sleep 1; echo "still $((6 * 7))"'));
  await waitUntil(async () => own.stats.warm > warm, 5000); // handed to a launcher
  await own.close();
  const out = await running;
  t.is(out.status, "completed");
  t.is(out.stdout, "still 42\n");
});

async function processesMentioning(text: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "latin1").catch(() => "");
    if (cmdline.includes(text) && (await alive(Number(entry)))) pids.push(Number(entry));
  }
  return pids;
}

async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, "latin1").catch(() => "");
  return stat !== "" && !stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
