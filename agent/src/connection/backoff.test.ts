import test from "ava";
import { Backoff, STABLE_STREAM_MS, YOUNG_CAP_MS, YOUNG_OUTAGE_MS } from "./backoff.js";

test("backoff - ceiling doubles up to the max and a Welcome resets it", (t) => {
  const top = new Backoff(250, 15_000, () => 0.999_999);
  t.deepEqual(
    Array.from({ length: 8 }, () => top.next()),
    [249, 499, 999, 1999, 3999, 7999, 14_999, 14_999],
  );
  top.reset();
  t.is(top.next(), 249);
});

test("backoff - full jitter spreads delays down to zero", (t) => {
  t.is(new Backoff(250, 15_000, () => 0).next(), 0);
  const random = new Backoff(100, 1000);
  for (let i = 0; i < 100; i++) {
    const delay = random.next();
    t.true(delay >= 0 && delay < 1000);
  }
});

/** A Backoff on a clock the test moves. */
function clocked(random: () => number = Math.random) {
  const clock = { t: 1_000_000 };
  return { clock, backoff: new Backoff(250, 15_000, random, () => clock.t) };
}

test("backoff - losing a stream that was up a while retries within the young cap", (t) => {
  const { clock, backoff } = clocked(() => 0.999_999);
  backoff.reset();
  clock.t += STABLE_STREAM_MS;
  // Decorrelated jitter at its top: 3 × the previous, capped at YOUNG_CAP_MS.
  const delays = [];
  for (let elapsed = 0; elapsed < YOUNG_OUTAGE_MS - 2_000; ) {
    const d = backoff.next();
    delays.push(d);
    elapsed += d;
    clock.t += d;
  }
  t.deepEqual(delays.slice(0, 3), [749, 1999, 1999]);
  t.true(delays.every((d) => d >= 250 && d < YOUNG_CAP_MS));
  // Past the young outage: the exponential schedule again, up to the max.
  clock.t += 2_000;
  const later = Array.from({ length: 3 }, () => backoff.next());
  t.true(later.every((d) => d > YOUNG_CAP_MS));
  t.is(later.at(-1), 14_999);
});

test("backoff - a young outage's delays stay between min and the cap at any randomness", (t) => {
  const { clock, backoff } = clocked();
  backoff.reset();
  clock.t += STABLE_STREAM_MS;
  for (let i = 0; i < 200; i++) {
    const d = backoff.next();
    t.true(d >= 250 && d < YOUNG_CAP_MS, `${d}`);
  }
  const low = clocked(() => 0);
  low.backoff.reset();
  low.clock.t += STABLE_STREAM_MS;
  t.is(low.backoff.next(), 250);
});

test("backoff - a stream that ends soon after its Welcome gets the exponential schedule (no fast loop)", (t) => {
  const { clock, backoff } = clocked(() => 0.999_999);
  backoff.reset();
  clock.t += STABLE_STREAM_MS - 1;
  t.deepEqual(
    Array.from({ length: 4 }, () => backoff.next()),
    [249, 499, 999, 1999],
  );
});

test("backoff - the first connect (never welcomed) uses the exponential schedule", (t) => {
  const { backoff } = clocked(() => 0.999_999);
  t.deepEqual(
    Array.from({ length: 7 }, () => backoff.next()),
    [249, 499, 999, 1999, 3999, 7999, 14_999],
  );
});
