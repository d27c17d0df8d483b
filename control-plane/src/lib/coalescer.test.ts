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

test("coalescer - with spareAt, callers coming one at a time wait for the batch in flight instead of each taking a free slot", async (t) => {
  const batches: number[][] = [];
  let inFlight = 0;
  let most = 0;
  let release: (() => void) | undefined;
  const c = new Coalescer<number, number>(
    async (items) => {
      batches.push(items);
      inFlight++;
      most = Math.max(most, inFlight);
      // The first batch is held until the test has submitted everything below spareAt.
      if (batches.length === 1)
        await new Promise<void>((r) => {
          release = r;
        });
      inFlight--;
      return items;
    },
    500,
    4,
    8,
  );
  const answers = [c.submit(0)];
  // Seven more, fewer than spareAt (8) waiting: no second batch starts.
  for (let i = 1; i <= 7; i++) answers.push(c.submit(i));
  t.is(batches.length, 1, "only the first batch started");
  release?.();
  t.deepEqual(await Promise.all(answers), [0, 1, 2, 3, 4, 5, 6, 7]);
  t.deepEqual(
    batches.map((b) => b.length),
    [1, 7],
    "the seven went together, after the first",
  );
  t.is(most, 1);
});

test("coalescer - with spareAt, a queue that reaches it opens the next slot, up to the concurrency", async (t) => {
  let inFlight = 0;
  let most = 0;
  const releases: (() => void)[] = [];
  const c = new Coalescer<number, number>(
    async (items) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise<void>((r) => releases.push(r));
      inFlight--;
      return items.map((i) => i * 10);
    },
    500,
    3,
    4,
  );
  const answers = Array.from({ length: 13 }, (_, i) => c.submit(i));
  // 1 alone, then every 4 waiting opens a slot until 3 run: [0], [1..4], [5..8]; 9..12 wait.
  t.is(releases.length, 3);
  t.is(most, 3);
  while (releases.length > 0) {
    releases.shift()?.();
    await new Promise((r) => setImmediate(r));
  }
  t.deepEqual(
    await Promise.all(answers),
    Array.from({ length: 13 }, (_, i) => i * 10),
  );
});

test("coalescer - lingerMs: a batch that starts with nothing in flight waits for the callers that follow", async (t) => {
  const batches: number[][] = [];
  const c = new Coalescer<number, number>(
    async (items) => {
      batches.push(items);
      return items;
    },
    500,
    1,
    1,
    500,
  );
  const nextTurn = () => new Promise((r) => setImmediate(r));
  const first = c.submit(1);
  // Callers in later turns of the event loop, all within the first one's linger.
  await nextTurn();
  const second = c.submit(2);
  await nextTurn();
  const third = c.submit(3);
  t.deepEqual(await Promise.all([first, second, third]), [1, 2, 3]);
  t.deepEqual(batches, [[1, 2, 3]], "one batch for the three");
  // Without a linger each would have started its own (the first at once, alone).
  const eager: number[][] = [];
  const d = new Coalescer<number, number>(async (items) => {
    eager.push(items);
    return items;
  });
  const e1 = d.submit(1);
  await nextTurn();
  const e2 = d.submit(2);
  await Promise.all([e1, e2]);
  t.deepEqual(eager, [[1], [2]]);
});
