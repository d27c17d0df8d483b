import test from "ava";
import pino, { type Logger } from "pino";
import { BOUND_REQUEST_ID, requestIdMixin, withRequestId } from "../tracing/request-id.js";
import { LazyLogger, lazyChildLogger } from "./lazy-logger.js";

function capture() {
  const raw: string[] = [];
  const log = pino(
    { mixin: requestIdMixin, base: undefined, timestamp: false, level: "info" },
    { write: (s: string) => raw.push(s) },
  );
  return { log, raw };
}

const bind = (child: Logger) => Object.assign(child, { [BOUND_REQUEST_ID]: true });

test("lazy logger - nothing made while nothing is logged at an enabled level", (t) => {
  const { log, raw } = capture();
  const lazy = new LazyLogger(log, { req_id: "r1" }, bind);
  lazy.debug({ a: 1 }, "below the level");
  lazy.trace("below the level");
  t.false(lazy.materialized);
  t.is(lazy.level, "info");
  t.false(lazy.isLevelEnabled("debug"));
  t.true(lazy.isLevelEnabled("warn"));
  t.deepEqual(raw, []);
});

test("lazy logger - a line is the eager child's line, naming its request once", (t) => {
  const { log, raw } = capture();
  const lazy = lazyChildLogger(log, { req_id: "r2" }, {}, bind);
  const eager = bind(log.child({ req_id: "r2" }));
  withRequestId("r2", () => {
    lazy.info({ status: 200 }, "answered");
    eager.info({ status: 200 }, "answered");
    lazy.warn("twice");
  });
  t.true((lazy as unknown as LazyLogger).materialized);
  t.is(raw.length, 3);
  t.is(raw[0], raw[1]);
  t.is(raw[0]!.split('"req_id"').length, 2);
  t.like(JSON.parse(raw[2]!), { req_id: "r2", msg: "twice", level: 40 });
});

test("lazy logger - child() carries the request's bindings and its own", (t) => {
  const { log, raw } = capture();
  const lazy = new LazyLogger(log, { req_id: "r3" }, bind);
  lazy.child({ component: "x" }).error("failed");
  t.like(JSON.parse(raw[0]!), { req_id: "r3", component: "x", msg: "failed" });
});

test("lazy logger - a route's own level makes pino's child at once", (t) => {
  const { log, raw } = capture();
  const child = lazyChildLogger(log, { req_id: "r4" }, { level: "debug" }, bind);
  t.false(child instanceof LazyLogger);
  child.debug("shown");
  t.like(JSON.parse(raw[0]!), { req_id: "r4", msg: "shown" });
});
