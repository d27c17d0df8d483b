import test from "ava";
import { Backoff } from "./backoff.js";

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
