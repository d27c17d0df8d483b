import { existsSync, readFileSync } from "node:fs";
import test from "ava";
import { ManagedProcess, ProcessGroup } from "./process.js";
import { descendantRefs, killIfSame } from "./proctree.js";
import { pollUntil } from "./wait.js";

const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/\) Z /.test(readStat(pid));
function readStat(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return "";
  }
}

test("supervisor - stop reaches the process's children too, also when it ignores SIGTERM", async (t) => {
  const proc = new ManagedProcess({
    name: "shell",
    command: "sh",
    args: ["-c", "trap '' TERM; sleep 60 & echo child $!; wait"],
  });
  const line = await proc.waitForLine((l) => l.text.startsWith("child "), {
    what: "child pid",
    timeoutMs: 5_000,
  });
  const child = Number(line.text.split(" ")[1]);
  t.true(alive(child));
  const exit = await proc.stop("SIGTERM", 300);
  t.is(exit.signal, "SIGKILL", "killed after the grace period");
  t.false(proc.running);
  // kill(2) returns before the target has died: give the kernel a moment to end it.
  await pollUntil(() => (alive(child) ? undefined : true), { what: "the child to die", timeoutMs: 5_000 });
  t.false(alive(child), "the child went with it");
});

test("supervisor - waits name what they waited for when the process exits first", async (t) => {
  const proc = new ManagedProcess({ name: "short", command: "sh", args: ["-c", "echo bye; exit 3"] });
  const err = await t.throwsAsync(proc.waitForMsg("ready", { timeoutMs: 5_000 }));
  t.regex(err.message, /^short: (exited|exited before log line "msg":"ready")/);
  t.is((await proc.exited).code, 3);
});

test("supervisor - a bounded tail keeps line numbers: mark and from still count every line", async (t) => {
  const group = new ProcessGroup();
  const proc = group.start({
    name: "counter",
    command: process.execPath,
    args: ["-e", "for (let i = 0; i < 10; i++) console.log(JSON.stringify({ msg: `n${i}` }))"],
    keepLines: 3,
  });
  await proc.exited;
  t.deepEqual(
    proc.lines.map((l) => l.json?.msg),
    ["n7", "n8", "n9"],
  );
  t.is(proc.mark(), 10);
  const from8 = await proc.waitForLine((l) => String(l.json?.msg).startsWith("n"), {
    what: "a line from 8 on",
    timeoutMs: 1_000,
    from: 8,
  });
  t.is(from8.json?.msg, "n8");
  await group.stopAll();
});

test("proctree - a kept pid is killed only while it still names the process seen (no kill of a reused pid)", async (t) => {
  const proc = new ManagedProcess({
    name: "shell",
    command: "sh",
    args: ["-c", "sleep 60 & echo child $!; wait"],
  });
  t.teardown(() => proc.stop("SIGKILL"));
  const line = await proc.waitForLine((l) => l.text.startsWith("child "), {
    what: "child pid",
    timeoutMs: 5_000,
  });
  const child = Number(line.text.split(" ")[1]);
  const ref = descendantRefs(proc.pid).find((p) => p.pid === child);
  t.truthy(ref, "the child is among the shell's descendants, with its start time");
  // The same pid with another start time is what a reused pid looks like: left alone.
  killIfSame({ pid: child, start: String(Number(ref!.start) + 1) }, "SIGKILL");
  t.true(alive(child), "a pid whose start time differs from the kept one is not signalled");
  killIfSame(ref!, "SIGKILL");
  await pollUntil(() => (alive(child) ? undefined : true), { what: "the child to die", timeoutMs: 5_000 });
  t.false(alive(child), "the process the ref names is killed");
});
