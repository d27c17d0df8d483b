// The automation-key shortcut of issue 17 (auth/admit-automation-key.ts): an api process caches
// only which key id a token hash belongs to, and reads the key's row in the same round trip as
// its rate-limit count. These tests hold it to what must not change, with two api processes on
// one database: every key is first used on BOTH (so both have it cached), then changed through
// the first, and the very next request to the second — sent after the change call returned, no
// waiting — sees the change: revoke, IP allowlist, operation scope, rate limit; and an expiry
// takes effect at its time.
import { randomUUID } from "node:crypto";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ApiResponse, type ApiTarget, api, request } from "./harness/http";
import { pollUntil } from "./harness/wait";

let c: Cluster;
let apiKey: string;
let first: ApiTarget;
let second: ApiTarget;

test.before(async () => {
  c = await startCluster({ apis: 2 });
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ci"])).key);
  first = { baseUrl: c.apis[0]!.apiUrl };
  second = { baseUrl: c.apis[1]!.apiUrl };
});
test.after.always(async () => {
  await cleanupAll();
});

/** Key management through the first api process. */
async function manage(method: string, path: string, body?: unknown): Promise<ApiResponse> {
  return request(first, `/api/automation-keys${path}`, {
    method,
    key: null,
    headers: { "x-api-key": apiKey },
    body,
  });
}

async function newKey(scope: Record<string, unknown> = {}): Promise<{ id: string; key: string }> {
  const res = await manage("POST", "", { name: `cache-${randomUUID().slice(0, 6)}`, ...scope });
  if (res.status !== 201) throw new Error(`create key: ${describe(res)}`);
  return { id: String(res.json.id), key: String(res.json.key) };
}

/** An admitted key reaches the route: an unknown operation is its 404. */
const probe = (target: ApiTarget, key: string) => api(target, `/operations/${randomUUID()}`, { key });

/** Uses the key on both processes until each admitted it (each has its id cached then). */
async function warm(t: { is(a: unknown, b: unknown, m?: string): void }, key: string) {
  for (const target of [first, second, first, second]) {
    const res = await probe(target, key);
    t.is(res.status, 404, `admitted before the change: ${describe(res)}`);
  }
}

test.serial(
  "key cache - a key revoked through one api process is refused by the other at once",
  async (t) => {
    const { id, key } = await newKey();
    await warm(t, key);
    const revoked = await manage("DELETE", `/${id}`);
    t.is(revoked.status, 204, describe(revoked));
    for (const target of [second, first]) {
      const res = await probe(target, key);
      t.is(res.status, 401, describe(res));
      t.is(res.json.detail, "automation key has been revoked");
    }
    // An exec too, before anything runs: no operation is recorded for the revoked key.
    const ex = await api(second, "/exec", { key, body: { server_id: c.serverId, command: "true" } });
    t.is(ex.status, 401, describe(ex));
    const rows = await c.db.query("SELECT COUNT(*) AS n FROM operations WHERE key_id = ?", [id]);
    t.is(Number(rows[0]!.n), 0);
  },
);

test.serial("key cache - an IP allowlist change applies on the other process at once", async (t) => {
  const { id, key } = await newKey();
  await warm(t, key);
  const narrowed = await manage("PATCH", `/${id}`, { ip_allowlist: ["10.0.0.0/8"] });
  t.is(narrowed.status, 200, describe(narrowed));
  const refused = await probe(second, key);
  t.is(refused.status, 403, describe(refused));
  t.regex(String(refused.json.detail), /IP allowlist/);
  const widened = await manage("PATCH", `/${id}`, { ip_allowlist: ["127.0.0.0/8"] });
  t.is(widened.status, 200, describe(widened));
  t.is((await probe(second, key)).status, 404);
});

test.serial("key cache - an operation scope change applies on the other process at once", async (t) => {
  const { id, key } = await newKey({ operations: ["exec"] });
  await warm(t, key);
  // In scope, an exec without a body's required fields is the body's 422; out of scope, 403 first.
  const inScope = await api(second, "/exec", { key, body: {} });
  t.is(inScope.status, 422, describe(inScope));
  const changed = await manage("PATCH", `/${id}`, { operations: ["deploy"] });
  t.is(changed.status, 200, describe(changed));
  const outOfScope = await api(second, "/exec", { key, body: {} });
  t.is(outOfScope.status, 403, describe(outOfScope));
  t.regex(String(outOfScope.json.detail), /operation scope/);
});

test.serial("key cache - a lowered rate limit applies on the other process at once", async (t) => {
  const { id, key } = await newKey({ rate_limit: 100 });
  await warm(t, key);
  // Four requests counted in this minute (or fewer, in a new one): a limit of 1 refuses the next
  // unless it is the first of a new window.
  const lowered = await manage("PATCH", `/${id}`, { rate_limit: 1 });
  t.is(lowered.status, 200, describe(lowered));
  const statuses = [(await probe(second, key)).status, (await probe(second, key)).status];
  t.is(statuses[1], 429, `after the limit of 1 was set: ${statuses.join(", ")}`);
});

test.serial(
  "key cache - an expiry takes effect at its time on a process that has the key cached",
  async (t) => {
    const expiresAt = Date.now() + 3000;
    const { key } = await newKey({ expires_at: new Date(expiresAt).toISOString() });
    await warm(t, key);
    const res = await pollUntil(
      async () => {
        const r = await probe(second, key);
        return r.status === 404 ? undefined : r;
      },
      { what: "the key to expire", timeoutMs: 15_000, intervalMs: 100 },
    );
    t.true(Date.now() >= expiresAt);
    t.is(res.status, 401, describe(res));
    t.is(res.json.detail, "automation key has expired");
  },
);
