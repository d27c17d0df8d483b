import test from "ava";
import pino from "pino";
import {
  BOUND_REQUEST_ID,
  currentRequestId,
  requestIdFrom,
  requestIdMixin,
  withRequestId,
} from "./request-id.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test("request id - a sane X-Request-Id is kept as is", (t) => {
  for (const id of ["abc", "ci-run-42.step_3", "0af7651916cd43dd8448eb211c80319c", "a:b/c+d=e@f"]) {
    t.is(requestIdFrom(id), id);
  }
});

test("request id - anything else gets a new UUID (no log or header injection)", (t) => {
  for (const bad of [
    undefined,
    "",
    " lead",
    "with space",
    "new\nline",
    'q"uote',
    "x".repeat(129),
    ["a", "b"],
  ]) {
    t.regex(requestIdFrom(bad), UUID, JSON.stringify(bad));
  }
});

test("request id - the mixin names the current request once, and never outside one", (t) => {
  const raw: string[] = [];
  const log = pino({ mixin: requestIdMixin, base: undefined }, { write: (s: string) => raw.push(s) });
  log.info("outside");
  withRequestId("req-1", () => log.child({ component: "x" }).info("inside"));
  const bound = Object.assign(log.child({ req_id: "req-2" }), { [BOUND_REQUEST_ID]: true });
  withRequestId("req-2", () => bound.info("bound"));
  const lines = raw.map((l) => JSON.parse(l) as Record<string, unknown>);
  t.is(lines[0]!.req_id, undefined);
  t.is(lines[1]!.req_id, "req-1");
  t.is(lines[2]!.req_id, "req-2");
  t.is(raw[2]!.split('"req_id"').length, 2, "named once on a logger that binds it");
  t.is(currentRequestId(), undefined);
});

test("request id - async work started inside a request keeps its id", async (t) => {
  const seen = await withRequestId("req-async", async () => {
    await new Promise((r) => setImmediate(r));
    return currentRequestId();
  });
  t.is(seen, "req-async");
});
