// The runner's warm launchers: a pty and shell spawned ahead, handed the command
// through a FIFO. Each test takes a run that went through a launcher (runWarm
// polls until one did) and checks it behaves as a cold spawn does.
import { mkdtempSync } from "node:fs";
import { mkdtemp, readFile, readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { PtyRunner } from "./pty-runner.js";
import type { RunOutcome, RunRequest } from "./runner.js";

const fifoDir = join(mkdtempSync(join(tmpdir(), "relayctl-warm-")), "fifo");
const runner = new PtyRunner({ shell: "/bin/bash", outputCapBytes: 1_048_576, killGraceMs: 300, fifoDir });
test.after.always(() => runner.close());

const request = (command: string, more: Partial<RunRequest> = {}): RunRequest => ({
  command,
  workingDirectory: "",
  env: {},
  deadlineSeconds: 30,
  secrets: [],
  ...more,
});

/** Runs `command` until one run of it went through a ready launcher (the first may come before one is). */
async function runWarm(command: string, more: Partial<RunRequest> = {}): Promise<RunOutcome> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const before = runner.stats.warm;
    const out = await runner.run(request(command, more));
    if (runner.stats.warm > before) return out;
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
  const dir = join(await mkdtemp(join(tmpdir(), "relayctl-warm-")), "fifo");
  const own = new PtyRunner({ shell: "/bin/bash", outputCapBytes: 1000, killGraceMs: 300, fifoDir: dir });
  const waiting = () => processesMentioning(dir);
  await waitUntil(async () => (await waiting()).length > 0, 10_000);
  await own.close();
  await t.notThrowsAsync(waitUntil(async () => (await waiting()).length === 0, 5000));
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
