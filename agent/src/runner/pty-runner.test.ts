import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { PtyRunner } from "./pty-runner.js";
import type { RunRequest } from "./runner.js";

const runner = new PtyRunner({ shell: "/bin/bash", outputCapBytes: 1_048_576, killGraceMs: 300 });
test.after.always(() => runner.close());

const run = (command: string, more: Partial<RunRequest> = {}) =>
  runner.run({ command, workingDirectory: "", env: {}, deadlineSeconds: 30, ...more });

const lines = (n: number) => Array.from({ length: n }, (_, i) => `${i + 1}\n`).join("");

test("pty runner - stdout and stderr are kept separate", async (t) => {
  const out = await run("echo out; echo err >&2; echo out2; echo err2 >&2");
  t.is(out.status, "completed");
  t.is(out.stdout, "out\nout2\n");
  t.is(out.stderr, "err\nerr2\n");
});

test("pty runner - non-zero exit code is reported", async (t) => {
  const out = await run("false");
  t.is(out.status, "completed");
  t.is(out.exitCode, 1);
  t.is((await run("exit 42")).exitCode, 42);
});

test("pty runner - env is added on top of the agent's and TERM is dumb", async (t) => {
  // secrets: [] — env values are scrubbed by default, and here we want to see one.
  const out = await run('echo "$GREETING|$TERM|${PATH:+has-path}"', {
    env: { GREETING: "hi there" },
    secrets: [],
  });
  t.is(out.stdout, "hi there|dumb|has-path\n");
});

test("pty runner - working directory is honoured", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "relayctl-cwd-"));
  const out = await run("pwd", { workingDirectory: dir });
  t.is(out.stdout, `${dir}\n`);
});

test("pty runner - missing working directory fails without running", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "relayctl-cwd-"));
  const marker = join(dir, "ran");
  const out = await run(`touch ${marker}`, { workingDirectory: join(dir, "missing") });
  t.is(out.status, "failed");
  t.regex(out.error ?? "", /working directory does not exist: .*missing/);
  await t.throwsAsync(readFile(marker));
});

test("pty runner - no output is lost when a command prints a lot and exits at once", async (t) => {
  // node-pty alone loses the tail here in 7-16% of runs; the end-marker handshake must not.
  const stdout = lines(2000);
  const stderr = lines(500);
  let whole = 0;
  for (let i = 0; i < 120; i++) {
    const withStderr = i % 3 === 0;
    const out = await run(withStderr ? "seq 1 2000; seq 1 500 >&2; exit 3" : "seq 1 2000; exit 3");
    if (out.stdout !== stdout || out.exitCode !== 3 || out.stderr !== (withStderr ? stderr : "")) {
      t.fail(
        `run ${i}: stdout ${out.stdout.length}/${stdout.length} chars, stderr ${out.stderr.length}, exit ${out.exitCode}`,
      );
      return;
    }
    whole++;
  }
  t.is(whole, 120, "every run arrived whole");
});

test("pty runner - a multi-byte character and a missing final newline come through", async (t) => {
  const out = await run("printf 'caf\\303\\251 \\342\\202\\254'; printf 'x\\r' >&2");
  t.is(out.stdout, "café €");
  t.is(out.stderr, "x\r");
});

test("pty runner - output past the cap is cut at exactly the cap with a marker", async (t) => {
  const small = new PtyRunner({ shell: "/bin/bash", outputCapBytes: 1000, killGraceMs: 300 });
  t.teardown(() => small.close());
  const out = await small.run({
    command: "head -c 5000 /dev/zero | tr '\\0' a; head -c 3000 /dev/zero | tr '\\0' b >&2; exit 7",
    workingDirectory: "",
    env: {},
    deadlineSeconds: 30,
  });
  t.is(out.stdout, `${"a".repeat(1000)}\n[relayctl: stdout truncated at 1000 bytes]\n`);
  t.is(out.stderr, `${"b".repeat(1000)}\n[relayctl: stderr truncated at 1000 bytes]\n`);
  t.is(out.exitCode, 7);
});

test("pty runner - the deadline kills the whole tree, also a child ignoring SIGTERM", async (t) => {
  // The inner shell ignores TERM (and HUP, so the session leader's exit cannot
  // kill it either): only the SIGKILL after the grace ends it.
  const out = await run(`bash -c 'trap "" TERM HUP; echo child=$$; sleep 30; echo never' & sleep 30`, {
    deadlineSeconds: 1,
  });
  t.is(out.status, "timeout");
  t.regex(out.error ?? "", /deadline of 1 s/);
  const pid = Number(/child=(\d+)/.exec(out.stdout)?.[1]);
  t.true(pid > 0, `child pid in output: ${JSON.stringify(out.stdout)}`);
  t.true(out.durationMs >= 1000 && out.durationMs < 10_000, `duration ${out.durationMs}`);
  await t.notThrowsAsync(waitUntilGone(pid, 5000));
});

/** Polls until `pid` no longer exists (a zombie awaiting its reaper counts as gone). */
async function waitUntilGone(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    const stat = await readFile(`/proc/${pid}/stat`, "latin1").catch(() => "");
    if (stat === "" || stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`process ${pid} still alive after ${timeoutMs} ms`);
}

test("pty runner - a command reading stdin gets EOF at once instead of hanging", async (t) => {
  const outcome = await runner.run({
    command: 'if read -r line; then echo "got $line"; else echo eof; fi; [ -t 1 ] && echo tty',
    workingDirectory: "",
    env: {},
    deadlineSeconds: 20,
  });
  t.is(outcome.status, "completed");
  t.is(outcome.stdout, "eof\ntty\n");
});

test("pty runner - env values are scrubbed from stdout and stderr, also base64-encoded", async (t) => {
  const token = "tok-3f9a/Zq+Secret value";
  const out = await run(
    `printf '%s\\n' "$TOKEN"; printf '%s' "$TOKEN" | base64; echo "$TOKEN" >&2; echo done`,
    { env: { TOKEN: token, MODE: "on" } },
  );
  t.is(out.status, "completed");
  t.is(out.stdout, "***\n***\ndone\n");
  t.is(out.stderr, "***\n");
  const everything = JSON.stringify(out);
  t.false(everything.includes(token), "the raw value appears nowhere in the result");
  t.false(everything.includes(Buffer.from(token).toString("base64").slice(0, 12)));
});

test("pty runner - secrets passed apart from env are scrubbed, short env values are not", async (t) => {
  const out = await run("echo login with hunter2-password as $MODE; echo hunter2-password >&2", {
    env: { MODE: "on" },
    secrets: ["hunter2-password", "on"],
  });
  t.is(out.stdout, "login with *** as on\n");
  t.is(out.stderr, "***\n");
});

test("pty runner - a secret cut by the output cap is not half-leaked", async (t) => {
  const small = new PtyRunner({ shell: "/bin/bash", outputCapBytes: 1000, killGraceMs: 300 });
  t.teardown(() => small.close());
  const secret = "LongSecretValue-0123456789";
  const out = await small.run({
    command: `head -c 998 /dev/zero | tr '\\0' a; echo "$S"; echo "$S" >&2; head -c 2000 /dev/zero >&2`,
    workingDirectory: "",
    env: { S: secret },
    deadlineSeconds: 30,
  });
  // Capped first, "Lo" would have been kept; scrubbed first, the cap cuts the `***`.
  t.is(out.stdout, `${"a".repeat(998)}**\n[relayctl: stdout truncated at 1000 bytes]\n`);
  t.true(out.stderr.startsWith("***\n"));
  t.false(JSON.stringify(out).includes(secret.slice(0, 2)));
});
