import test from "ava";
import { MAX_FIELD_CHARS, logFormatter } from "./log-format.js";

const format = logFormatter();
/** A raw newline, carriage return, ESC or BEL: what must never reach the terminal from a field. */
const hasRawControl = (s: string) => ["\n", "\r", "\u001b", "\u0007"].some((c) => s.includes(c));
const line = (fields: Record<string, unknown>) =>
  JSON.stringify({
    level: 30,
    time: 1_700_000_000_000,
    pid: 1,
    hostname: "h",
    msg: "agent connected",
    ...fields,
  });

test("dev log - a newline in a field cannot forge a log line of its own", (t) => {
  const forged = '{"level":30,"time":1700000000000,"msg":"operation finished"}';
  const out = format(line({ boot_id: `b-1\n${forged}\r\n` }));
  t.false(out.includes("\n"), out);
  t.false(out.includes("\r"), out);
  t.true(out.includes("agent connected"), out);
  t.true(out.includes("b-1\\n{"), out);
});

test("dev log - a newline or terminal escape in the message is shown escaped", (t) => {
  const out = format(line({ msg: "first\nINFO: forged \u001b[2J\u0007" }));
  t.false(hasRawControl(out), out);
  t.true(out.includes("first\\nINFO: forged \\u001b[2J\\u0007"), out);
});

test("dev log - a long field is capped and says how much was left out", (t) => {
  const out = format(line({ stdout: "x".repeat(MAX_FIELD_CHARS + 500) }));
  t.true(out.includes(`${"x".repeat(MAX_FIELD_CHARS)}…[500 more chars]`), out.slice(-80));
  t.false(out.includes("x".repeat(MAX_FIELD_CHARS + 1)), "nothing past the cap is printed");
});

test("dev log - nested values and keys are escaped too", (t) => {
  const out = format(line({ peer: { name: "a\nb", "k\u001b": ["c\nd"] } }));
  t.false(hasRawControl(out), out);
});

test("dev log - a stack keeps its line breaks, each indented under its log line", (t) => {
  const out = format(
    line({
      level: 50,
      msg: "boom",
      err: { type: "Error", message: "boom", stack: "Error: boom\n    at f (a.js:1:1)" },
    }),
  );
  const lines = out.split("\n");
  t.true(lines[0]!.includes("ERROR") && lines[0]!.includes("boom"), out);
  t.true(lines.length > 1, out);
  for (const l of lines.slice(1)) t.regex(l, /^\s/, `continuation lines are indented: ${out}`);
});

test("dev log - a line that is not JSON is printed escaped and capped", (t) => {
  const out = format(`plain \u001b[31mred\u001b[0m ${"y".repeat(MAX_FIELD_CHARS * 5)}`);
  t.true(out.startsWith("plain \\u001b[31mred\\u001b[0m "), out.slice(0, 60));
  t.true(out.length < MAX_FIELD_CHARS * 4 + 100, `${out.length} chars`);
});
