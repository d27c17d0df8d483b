import { Writable } from "node:stream";
import test from "ava";
import pino from "pino";
import { StreamLog } from "./stream-log.js";

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
