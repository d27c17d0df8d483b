import test from "ava";
import { Coalescer } from "./coalescer.js";

test("coalescer - callers arriving while a batch is in flight share the next one, each gets its own answer", async (t) => {
  const batches: number[][] = [];
  const c = new Coalescer<number, number>(async (items) => {
    batches.push(items);
    await new Promise((r) => setTimeout(r, 10));
    return items.map((i) => i * 2);
  }, 50);
  const answers = await Promise.all(Array.from({ length: 120 }, (_, i) => c.submit(i)));
  t.deepEqual(
    answers,
    Array.from({ length: 120 }, (_, i) => i * 2),
  );
  // The first item goes alone; the 119 that queued behind it go in batches of at most 50.
  t.deepEqual(
    batches.map((b) => b.length),
    [1, 50, 50, 19],
  );
  t.deepEqual(
    batches.flat(),
    Array.from({ length: 120 }, (_, i) => i),
    "every item once, in order",
  );
});

test("coalescer - a failing batch fails only its own callers; later ones still run", async (t) => {
  let calls = 0;
  const c = new Coalescer<string, string>(async (items) => {
    calls++;
    if (items.includes("bad")) throw new Error("store down");
    return items.map((i) => i.toUpperCase());
  });
  const first = c.submit("bad");
  const queued = [c.submit("a"), c.submit("b")];
  await t.throwsAsync(first, { message: "store down" });
  t.deepEqual(await Promise.all(queued), ["A", "B"]);
  t.is(calls, 2);
});

test("coalescer - with a concurrency of 3, up to 3 batches run at once and every item is answered once", async (t) => {
  let inFlight = 0;
  let most = 0;
  const seen: number[] = [];
  const c = new Coalescer<number, number>(
    async (items) => {
      inFlight++;
      most = Math.max(most, inFlight);
      seen.push(...items);
      await new Promise((r) => setTimeout(r, 10));
      inFlight--;
      return items.map((i) => i + 1);
    },
    20,
    3,
  );
  const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => c.submit(i)));
  t.deepEqual(
    answers,
    Array.from({ length: 200 }, (_, i) => i + 1),
  );
  t.is(most, 3);
  t.deepEqual(
    [...seen].sort((a, b) => a - b),
    Array.from({ length: 200 }, (_, i) => i),
  );
});
