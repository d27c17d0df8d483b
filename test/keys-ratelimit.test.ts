// Per-key rate limit of automation keys, exact across two api processes sharing one
// database: exactly rate_limit requests of a window pass, the rest are 429 with
// Retry-After, and a flood leaves one rate_limit.hit event per key and window.
import { randomUUID } from "node:crypto";
import test from "ava";
import { waitForMinuteRoom } from "./harness/wait";
import { assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ControlPlane, startControlPlane } from "./harness/control-plane";
import { api, request } from "./harness/http";

let c: Cluster;
let apiKey: string;
let second: ControlPlane;

test.before(async () => {
  c = await startCluster();
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ci"])).key);
  second = await startControlPlane({ ...c.api.opts });
});
test.after.always(async () => {
  await second?.stop();
  await cleanupAll();
});

async function automationKey(rateLimit: number) {
  const res = await request(c, "/api/automation-keys", {
    key: null,
    headers: { "x-api-key": apiKey },
    body: { name: `limited-${randomUUID().slice(0, 6)}`, rate_limit: rateLimit },
  });
  if (res.status !== 201) throw new Error(`create key: ${describe(res)}`);
  return { id: String(res.json.id), key: String(res.json.key) };
}

test("rate limit - exactly rate_limit requests pass per window across two api processes", async (t) => {
  const limit = 7;
  const { id, key } = await automationKey(limit);
  await waitForMinuteRoom(20_000);
  const targets = [c.baseUrl, second.apiUrl];
  // interleaved and concurrent: even requests to the first process, odd to the second
  const answers = await Promise.all(
    Array.from({ length: 30 }, (_, i) =>
      api({ baseUrl: targets[i % 2], key }, `/operations/${randomUUID()}`),
    ),
  );
  const passed = answers.filter((r) => r.status === 404);
  const limited = answers.filter((r) => r.status === 429);
  t.is(passed.length, limit, answers.map((r) => r.status).join(","));
  t.is(limited.length, 30 - limit);
  for (const r of limited) {
    t.regex(assertDetailOnly(t, r, 429), /rate limit exceeded: 7 requests per minute/);
    const retry = Number(r.headers.get("retry-after"));
    t.true(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${retry}`);
  }
  // both processes refused some: the limit is shared, not per process
  t.true(answers.some((r, i) => i % 2 === 0 && r.status === 429));
  t.true(answers.some((r, i) => i % 2 === 1 && r.status === 429));

  const hits = await c.db.query("SELECT payload FROM audit_events WHERE key_id = ? AND event_type = ?", [
    id,
    "rate_limit.hit",
  ]);
  t.is(hits.length, 1, "one audit event for the whole flood");
  t.like(JSON.parse(String(hits[0].payload)), {
    limit,
    window_seconds: 60,
    actor: { key_id: id },
    ip: "127.0.0.1",
  });
  const [counter] = await c.db.query("SELECT SUM(count) AS n FROM rate_limit_counters WHERE key_id = ?", [
    id,
  ]);
  t.is(Number(counter.n), 30, "rejected requests are still counted (count - limit = rejected)");
});

test("rate limit - keys are limited independently", async (t) => {
  const a = await automationKey(1);
  const b = await automationKey(1);
  await waitForMinuteRoom(10_000);
  t.is((await api({ baseUrl: c.baseUrl, key: a.key }, `/operations/${randomUUID()}`)).status, 404);
  assertDetailOnly(t, await api({ baseUrl: second.apiUrl, key: a.key }, `/operations/${randomUUID()}`), 429);
  t.is((await api({ baseUrl: second.apiUrl, key: b.key }, `/operations/${randomUUID()}`)).status, 404);
});

test("rate limit - 150 refused requests of a key limited to 5/min: 5 refusals, then 429s, two audit events", async (t) => {
  const res = await request(c, "/api/automation-keys", {
    key: null,
    headers: { "x-api-key": apiKey },
    body: { name: `refused-${randomUUID().slice(0, 6)}`, rate_limit: 5, operations: ["deploy"] },
  });
  const id = String(res.json.id);
  const key = String(res.json.key);
  await waitForMinuteRoom(30_000);
  const targets = [c.baseUrl, second.apiUrl];
  const body = { server_id: c.serverId, command: "true" };
  // 403 (no exec scope) until the window is used up, then 429, alternating between the
  // processes; one after another, so the hit event's count of earlier refusals is exact
  const answers = [];
  for (let i = 0; i < 150; i++)
    answers.push(await request({ baseUrl: targets[i % 2], key }, "/api/automation/v1/exec", { body }));
  t.is(answers.filter((r) => r.status === 403).length, 5, answers.map((r) => r.status).join(","));
  t.is(answers.filter((r) => r.status === 429).length, 145);
  const events = await c.db.query(
    "SELECT event_type, payload FROM audit_events WHERE key_id = ? AND event_type IN ('auth.refused', 'rate_limit.hit') ORDER BY seq",
    [id],
  );
  t.deepEqual(
    events.map((e) => e.event_type),
    ["auth.refused", "rate_limit.hit"],
    "one event of each kind for the whole flood",
  );
  t.like(JSON.parse(String(events[0].payload)), {
    status: 403,
    code: "RC_ERR_FORBIDDEN",
    window_seconds: 60,
  });
  t.like(JSON.parse(String(events[1].payload)), { limit: 5, window_seconds: 60, refused: 5 });
  const [counter] = await c.db.query(
    "SELECT SUM(count) AS n, SUM(refused) AS refused FROM rate_limit_counters WHERE key_id = ?",
    [id],
  );
  t.deepEqual([Number(counter.n), Number(counter.refused)], [150, 5]);
});
