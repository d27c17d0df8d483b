import test from "ava";
import { resolveBinary, runCli } from "./cli-process.js";

test("engine cli - argv is passed as is (no shell) and stdin reaches the program", async (t) => {
  const o = await runCli({
    binary: "/bin/sh",
    args: ["-c", 'printf "%s|" "$@"; cat', "sh", "a;id", "$(id)"],
    stdin: "from-stdin",
    deadlineSeconds: 10,
  });
  t.is(o.status, "completed");
  t.is(o.exitCode, 0);
  t.is(o.stdout, "a;id|$(id)|from-stdin");
});

test("engine cli - secrets are scrubbed from stdout and stderr, also base64", async (t) => {
  const secret = "hunter2-secret";
  const o = await runCli({
    binary: "/bin/sh",
    args: ["-c", 'read p; echo "pw=$p"; printf "%s" "u:$p" | base64 >&2; exit 3'],
    stdin: `${secret}\n`,
    deadlineSeconds: 10,
    secrets: [secret],
  });
  t.is(o.exitCode, 3);
  t.false(o.stdout.includes(secret), o.stdout);
  t.is(o.stdout, "pw=***\n");
  t.false(o.stderr.includes(Buffer.from(`u:${secret}`).toString("base64").slice(4, -4)), o.stderr);
});

test("engine cli - a missing binary is failed, a slow one is killed at the deadline", async (t) => {
  const missing = await runCli({ binary: "/nonexistent/docker", args: ["logout", "x"], deadlineSeconds: 5 });
  t.is(missing.status, "failed");
  t.is(missing.exitCode, -1);
  t.regex(missing.error ?? "", /ENOENT/);
  const slow = await runCli({ binary: "/bin/sleep", args: ["30"], deadlineSeconds: 1 });
  t.is(slow.status, "timeout");
  t.not(slow.exitCode, 0);
});

test("engine cli - the binary is found on the agent's PATH, not on a PATH given to the child", async (t) => {
  const o = await runCli({
    binary: "sh",
    args: ["-c", 'printf "%s" "$PATH"'],
    env: { PATH: "/nonexistent-app-path" },
    deadlineSeconds: 10,
  });
  t.is(o.status, "completed", o.error);
  t.is(o.stdout, "/nonexistent-app-path", "the child still gets the PATH it was given");
  t.regex(resolveBinary("sh"), /^\/.*\/sh$/);
  t.is(resolveBinary("/bin/sh"), "/bin/sh");
});

test("engine cli - aborting the job's signal kills the child at once", async (t) => {
  const abort = new AbortController();
  const started = Date.now();
  const run = runCli({ binary: "/bin/sleep", args: ["30"], deadlineSeconds: 60, signal: abort.signal });
  abort.abort();
  const o = await run;
  t.is(o.status, "timeout");
  t.regex(o.error ?? "", /deadline passed/);
  t.true(Date.now() - started < 10_000);
});

test("engine cli - live output is scrubbed, also of a secret split across two chunks", async (t) => {
  const secret = "hunter2-secret";
  const live: string[] = [];
  const o = await runCli({
    binary: "/bin/sh",
    // The pause makes the two halves two reads of the pipe.
    args: ["-c", 'printf "pw=hunter2-"; sleep 0.3; printf "secret done\\n"'],
    deadlineSeconds: 10,
    secrets: [secret],
    onOutput: (text) => live.push(text),
  });
  t.is(o.stdout, "pw=*** done\n");
  t.is(live.join(""), "pw=*** done\n");
  t.false(live.some((c) => c.includes("hunter2")));
});
