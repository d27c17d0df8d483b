import test from "ava";
import { matches, parseSelector, placementSchema } from "./placement.js";
import { batchesOf, compileStrategy, strategySchema } from "./strategy.js";

test("strategy - defaults: one server at a time, no failure tolerated, rollback on a halt", (t) => {
  t.deepEqual(compileStrategy(null), {
    max_parallel: 1,
    max_failures: 0,
    pause_seconds: 0,
    canary: false,
    auto_rollback: true,
  });
  t.deepEqual(batchesOf(compileStrategy(null), 3), [[0], [1], [2]]);
});

test("strategy - the request's fields over the application's", (t) => {
  const s = compileStrategy({ max_parallel: 4, max_failures: 2 }, { max_failures: 0 });
  t.is(s.max_parallel, 4);
  t.is(s.max_failures, 0);
});

test("strategy - a percentage rounds up, at least one; the canary goes alone first", (t) => {
  t.deepEqual(
    batchesOf(compileStrategy({ max_parallel: "10%" }), 25).map((b) => b.length),
    [3, 3, 3, 3, 3, 3, 3, 3, 1],
  );
  t.deepEqual(batchesOf(compileStrategy({ max_parallel: "1%" }), 3), [[0], [1], [2]]);
  t.deepEqual(batchesOf(compileStrategy({ max_parallel: 2, canary: true }), 5), [[0], [1, 2], [3, 4]]);
  t.deepEqual(batchesOf(compileStrategy({ max_parallel: "100%" }), 200).length, 1);
});

test("strategy - the schema refuses what cannot roll out", (t) => {
  for (const bad of [
    { max_parallel: 0 },
    { max_parallel: "0%" },
    { max_parallel: "101%" },
    { max_failures: -1 },
    { x: 1 },
  ])
    t.false(strategySchema.safeParse(bad).success, JSON.stringify(bad));
});

test("placement - a selector is key=value pairs; every pair must match", (t) => {
  t.deepEqual(parseSelector("region=eu, role=web"), { region: "eu", role: "web" });
  t.true(matches({ region: "eu", role: "web", zone: "a" }, parseSelector("region=eu,role=web")));
  t.false(matches({ region: "eu" }, parseSelector("region=eu,role=web")));
  t.true(placementSchema.safeParse({ selector: "region=eu,role=web" }).success);
  t.true(placementSchema.safeParse({ servers: ["web-1"] }).success);
  t.true(placementSchema.safeParse(null).success);
  for (const bad of [
    { selector: "region" },
    { selector: "-x=1" },
    { selector: "a=b=c" },
    { servers: [] },
    {},
  ])
    t.false(placementSchema.safeParse(bad).success, JSON.stringify(bad));
});

test("strategy - drain_seconds is 0 to 600, and a strategy without a drain has no drain_seconds", (t) => {
  t.false(strategySchema.safeParse({ drain_seconds: 601 }).success);
  t.false(strategySchema.safeParse({ drain_seconds: -1 }).success);
  t.false(strategySchema.safeParse({ drain_seconds: 1.5 }).success);
  t.is(compileStrategy({ drain_seconds: 30 }).drain_seconds, 30);
  t.false("drain_seconds" in compileStrategy({ drain_seconds: 30 }, { drain_seconds: 0 }));
});
