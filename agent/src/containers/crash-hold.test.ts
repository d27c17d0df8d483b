import test from "ava";
import { FIRST_HOLD_MS, MAX_HOLD_MS, holdMs } from "./crash-hold.js";

test("crash hold - 10 s, doubling at each hold of a loop, at most 5 min", (t) => {
  t.deepEqual(
    [0, 1, 2, 3, 4, 5, 6, 100].map((level) => holdMs(level)),
    [10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000],
  );
  t.is(FIRST_HOLD_MS, 10_000);
  t.is(MAX_HOLD_MS, 300_000);
  t.is(holdMs(2, 1000, 60_000), 4000, "the agent's setting replaces the first hold");
});
