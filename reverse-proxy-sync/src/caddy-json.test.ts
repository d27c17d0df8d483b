// The Caddy writer's shortcuts against the slower forms they stand for: sameJson
// against the canonical texts' equality, compareIds against localeCompare.
import test from "ava";
import { canonical, compareIds, idKey, sameJson } from "./caddy-json.js";
import { seededRandom } from "../../devkit/src/random.js";

const PLAIN = [null, undefined, 0, -0, 1, 503, 200, true, false, "", "a", "1", "live\n", "127.0.0.1:80"];
const KEYS = ["@id", "match", "host", "handle", "dial", "terminal", "a", "b"];

function value(r: () => number, depth: number): unknown {
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)]!;
  const kind = r();
  if (depth > 2 || kind < 0.4) return pick(PLAIN);
  if (kind < 0.65) return Array.from({ length: Math.floor(r() * 3) }, () => value(r, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = Math.floor(r() * 4); i > 0; i--) o[pick(KEYS)] = value(r, depth + 1);
  return o;
}

/** The same value, its objects' keys in another order (what Caddy hands back). */
function reordered(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(reordered);
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(o)
        .reverse()
        .map((k) => [k, reordered(o[k])]),
    );
  }
  return v;
}

test("sameJson answers as the canonical texts compare", (t) => {
  const r = seededRandom(34);
  let same = 0;
  for (let i = 0; i < 20_000; i++) {
    const a = value(r, 0);
    const b = r() < 0.5 ? reordered(a) : value(r, 0);
    const want = canonical(a) === canonical(b);
    if (sameJson(a, b) !== want) return t.fail(`${canonical(a)} vs ${canonical(b)}: ${!want}`);
    if (want) same++;
  }
  t.true(same > 5000, `equal pairs: ${same}`);
  // Where the texts meet though the values differ: [] and [undefined].
  t.true(sameJson([], [undefined]));
  t.false(sameJson([1], { 0: 1 }));
  t.false(sameJson({ a: 1 }, { a: 1, b: undefined }));
});

test("compareIds orders as localeCompare does, by code units only for ids of [0-9a-z-]", (t) => {
  const r = seededRandom(7);
  const plain = "0123456789abcdefghijklmnopqrstuvwxyz-";
  // Characters the collator orders otherwise than their code units: every id with one goes to it.
  const other = `${plain}AZ_.é*ß ~`;
  for (const chars of [plain, other]) {
    for (let i = 0; i < 50_000; i++) {
      const id = () =>
        Array.from({ length: Math.floor(r() * 6) }, () => chars[Math.floor(r() * chars.length)]).join("");
      const a = id();
      const b = id();
      const got = Math.sign(compareIds(idKey(a), idKey(b)));
      if (got !== Math.sign(a.localeCompare(b)))
        return t.fail(`${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
    }
  }
  // Code units and the collator part ways here: the guard must send these to the collator.
  t.is(Math.sign(compareIds(idKey("B"), idKey("a"))), Math.sign("B".localeCompare("a")));
  t.is(Math.sign(compareIds(idKey("a_b"), idKey("a-b"))), Math.sign("a_b".localeCompare("a-b")));
  const [upper, lower] = ["B", "a"];
  t.not(Math.sign(upper.localeCompare(lower)), upper < lower ? -1 : 1);
  t.true(idKey("relayctl-app-0b6f8a1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b").plain);
});
