import test from "ava";
import { budgetPage } from "./budget-page.js";

const rows = Array.from({ length: 25 }, (_, i) => ({ n: i, text: "x".repeat(100) }));
const fetch = async (after: { n: number } | undefined, limit: number) =>
  rows.filter((r) => r.n > (after?.n ?? -1)).slice(0, limit);

test("budget page - stops at the count and says where to go on", async (t) => {
  const page = await budgetPage({ max: 10, budgetBytes: 1e6, chunk: 4, fetch, present: (r) => r });
  t.deepEqual(
    page.entries.map((e) => e.n),
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
  );
  t.is(page.next?.n, 9);
});

test("budget page - stops at the byte budget, keeps at least one entry, ends with no next", async (t) => {
  const page = await budgetPage({ max: 100, budgetBytes: 500, chunk: 4, fetch, present: (r) => r });
  t.true(page.entries.length >= 1 && page.entries.length < 5, String(page.entries.length));
  t.true(Buffer.byteLength(JSON.stringify(page.entries)) <= 500);
  const tiny = await budgetPage({ max: 100, budgetBytes: 1, chunk: 4, fetch, present: (r) => r });
  t.is(tiny.entries.length, 1);
  const all = await budgetPage({ max: 100, budgetBytes: 1e6, chunk: 4, fetch, present: (r) => r });
  t.is(all.entries.length, 25);
  t.is(all.next, undefined);
});
