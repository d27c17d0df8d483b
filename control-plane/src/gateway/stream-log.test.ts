import { Writable } from "node:stream";
import test from "ava";
import pino from "pino";
import { LINES_PER_SECOND, LineBudget, StreamLog } from "./stream-log.js";

/** A logger writing to memory, with a fixed clock so two writers' lines can be compared. */
function memoryLogger(level: string): { log: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { log: pino({ level, timestamp: () => ',"time":1' }, sink), lines };
}

test("stream log - its lines are a pino child's with the server and connection, byte for byte", (t) => {
  const a = memoryLogger("info");
  const b = memoryLogger("info");
  const child = a.log.child({ server_id: "s1", connection_id: "c1" });
  const mine = new StreamLog(b.log, "s1", "c1");
  const err = new Error("boom");
  child.info({ reason: "gone" }, "agent stream closed");
  mine.info({ reason: "gone" }, "agent stream closed");
  child.error({ err, kind: "jobResult" }, "agent message handling failed");
  mine.error({ err, kind: "jobResult" }, "agent message handling failed");
  mine.child().info({ boot_id: "x" }, "via child");
  child.info({ boot_id: "x" }, "via child");
  t.is(b.lines.length, 3);
  t.deepEqual(b.lines.slice(0, 2), a.lines.slice(0, 2));
  t.is(b.lines[2], a.lines[2]);
  t.true(b.lines[0]!.includes('"server_id":"s1","connection_id":"c1","reason":"gone"'));
});

test("stream log - a line below the level is not written", (t) => {
  const b = memoryLogger("error");
  const mine = new StreamLog(b.log, "s1", "c1");
  mine.info({ reason: "gone" }, "agent stream closed");
  mine.error({ kind: "hello" }, "failed");
  t.is(b.lines.length, 1);
});

/** Polls `f` until it holds, for at most `ms` (the budget's summary comes when its second ends). */
async function until(f: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!f()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

test("stream log - a storm's per-connection lines: the gateway's budget a second, then one line with the count", async (t) => {
  const { log, lines } = memoryLogger("info");
  const streams = Array.from({ length: 500 }, (_, i) => new StreamLog(log, `s${i}`, `c${i}`));
  // All 500 in one tick: within one second of the clock, or across two at most.
  for (const s of streams) s.perConnection({ boot_id: "b" }, "agent connected");
  const connected = () => lines.filter((l) => l.includes('"msg":"agent connected"'));
  t.true(connected().length >= 1 && connected().length <= 2 * LINES_PER_SECOND, `${connected().length}`);
  const summaries = () =>
    lines.filter((l) => l.includes('"msg":"agent connected: ')).map((l) => JSON.parse(l).lines_left_out);
  t.true(await until(() => summaries().reduce((a, b) => a + b, 0) === 500 - connected().length, 3000));
  // Each written line still names its own server and connection.
  t.true(
    connected().every((l) => {
      const { server_id, connection_id } = JSON.parse(l);
      return server_id.slice(1) === connection_id.slice(1);
    }),
  );
  // Another message has a budget of its own.
  streams[0]!.perConnection({ reason: "gone" }, "agent stream closed");
  t.is(lines.filter((l) => l.includes('"msg":"agent stream closed"')).length, 1);
});

test("stream log - a line budget: each second its own, the lines left out said once, when the next second begins", async (t) => {
  let now = 5_000;
  const { log, lines } = memoryLogger("info");
  const budget = new LineBudget(log, "agent connected", 3, () => now);
  const taken = [budget.take(), budget.take(), budget.take(), budget.take()];
  t.deepEqual(taken, [true, true, true, false]);
  // The next second: its own budget, and the one left out of the last is said first.
  now = 6_000;
  t.true(budget.take());
  t.is(lines.length, 1);
  t.is(JSON.parse(lines[0]!).lines_left_out, 1);
  t.true(budget.take() && budget.take());
  now = 7_500;
  t.true(budget.take());
  t.is(lines.length, 1);
});
