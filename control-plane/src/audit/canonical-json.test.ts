// canonicalJson's shortcut (one JSON.stringify for a plain object whose keys are
// in order already and whose values are plain) must write exactly the text of
// the walk it skips: every stored hash depends on it.
import test from "ava";
import { canonicalJson } from "./audit-log.js";
import { seededRandom } from "../../../devkit/src/random.js";

/** The walk as it was before the shortcut (2070eca), the reference. */
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(",")}]`;
  if (value && typeof value === "object") {
    const o = value as Record<string, unknown>;
    let out = "{";
    for (const k of Object.keys(o).sort()) {
      const v = o[k];
      if (v === undefined) continue;
      out += `${out.length > 1 ? "," : ""}${JSON.stringify(k)}:${reference(v)}`;
    }
    return `${out}}`;
  }
  return JSON.stringify(value ?? null);
}

const KEYS = ["a", "b", "B", "_x", "é", "10", "9", "0", "z", "aa", "ab", "__proto_", "toJSONx", 'k"q', ""];
const PLAIN = [
  null,
  undefined,
  0,
  -0,
  1.5,
  -7,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  true,
  false,
  "",
  "s",
  'q"\\\n',
  "é\u2028",
  "\ud800",
];

function value(r: () => number, depth: number): unknown {
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!;
  const kind = r();
  if (depth > 2 || kind < 0.45) return pick(PLAIN);
  if (kind < 0.65) return Array.from({ length: Math.floor(r() * 4) }, () => value(r, depth + 1));
  const o: Record<string, unknown> = {};
  const keys = Array.from({ length: Math.floor(r() * 6) }, () => pick(KEYS));
  // Half of the objects get their keys in code-unit order: the shortcut's case.
  if (r() < 0.5) keys.sort();
  for (const k of keys) o[k] = value(r, depth + 1);
  return o;
}

test("canonicalJson writes the reference text for random values, keys in order or not", (t) => {
  const r = seededRandom(34);
  let flat = 0;
  for (let i = 0; i < 20_000; i++) {
    const v = value(r, 0);
    const text = canonicalJson(v);
    if (text !== reference(v)) return t.fail(`differs for ${String(reference(v))}: ${text}`);
    if (v && typeof v === "object" && !Array.isArray(v) && text === JSON.stringify(v)) flat++;
  }
  t.true(flat > 1000, `the shortcut's case came up ${flat} times`);
});

test("canonicalJson: what JSON.stringify writes otherwise is never taken as it is", (t) => {
  const cases: unknown[] = [
    { b: 1, a: 2 }, // keys out of order
    { 9: "x", 10: "y" }, // integer keys: Object.keys gives 9 before 10, code units 10 before 9
    // biome-ignore lint/suspicious/noSparseArray: a hole is the case: null in JSON.stringify, nothing in the walk
    { a: [1, , 3] },
    { a: new Date(0) }, // toJSON below
    { toJSON: () => "x", a: 1 },
    Object.assign(Object.create({ toJSON: () => "y" }), { a: 1 }), // inherited toJSON
    new String("ab"), // unwrapped by JSON.stringify
    Object.assign(new Number(3), { a: 1 }),
    { a: { c: 1, b: 2 } }, // a nested object out of order
    { a: [{ c: 1, b: 2 }] },
    { a: Symbol("s"), b: () => 1 },
    Object.assign(Object.create(null), { a: 1, b: [undefined, null] }),
    { a: undefined, b: [undefined] },
  ];
  for (const v of cases) t.is(canonicalJson(v), reference(v));
});
