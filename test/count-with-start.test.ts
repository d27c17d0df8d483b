// An exec's request counted by the commit of its operation's start instead of an admission
// round trip of its own (control-plane/src/auth/deferred-count.ts), through the real processes
// (two api processes, a gateway, one agent, MariaDB, NATS): each request counted exactly once,
// whoever commits its start; the limit exact across the two apis; a key revoked after its row
// was cached refused at its next exec with nothing run; 429 still before 422; a server that is
// not connected and a wait that ends counted once, and so is a request that goes away before
// its handler. The store's side: count-with-start-store.test.ts.
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { connect } from "node:net";
import test from "ava";
import { pollUntil, waitForMinuteRoom } from "./harness/wait";
import { assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ApiResponse, request } from "./harness/http";

let c: Cluster;
let apiKey: string;

test.before(async () => {
  c = await startCluster({ apis: 2 });
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ci"])).key);
});
test.after.always(async () => {
  await c?.stop();
  await cleanupAll();
});

const apiUrls = () => c.apis.map((a) => a.apiUrl);

async function newKey(rateLimit: number) {
  const { key, keyId } = await c.createKey(["--rate-limit", String(rateLimit)]);
  return { key, id: keyId };
}

/** A key of limit 1000 whose first exec went through the first api: that api now admits it on its row. */
async function keyAdmittedOnce(roomMs: number) {
  const { key, id } = await newKey(1000);
  await waitForMinuteRoom(roomMs);
  const url = apiUrls()[0]!;
  const first = await exec(url, key);
  if (first.status !== 200) throw new Error(`first exec: ${describe(first)}`);
  return { key, id, url };
}

function exec(baseUrl: string, key: string, body: Record<string, unknown> = {}): Promise<ApiResponse> {
  return request({ baseUrl, key }, "/api/automation/v1/exec", {
    body: { server_id: c.serverId, command: "echo counted", ...body },
  });
}

/** `way` → admissions of automation keys counted by the api process at `baseUrl`. */
async function admissions(baseUrl: string): Promise<Record<string, number>> {
  const res = await request({ baseUrl }, "/metrics", { key: null });
  if (res.status !== 200) throw new Error(`GET /metrics: ${describe(res)}`);
  const out: Record<string, number> = {};
  for (const m of res.text.matchAll(/^relayctl_automation_key_admissions_total\{way="(\w+)"\} (\d+)$/gm))
    out[m[1]!] = Number(m[2]);
  return out;
}

const moved = (after: Record<string, number>, before: Record<string, number>, way: string) =>
  (after[way] ?? 0) - (before[way] ?? 0);

async function countOf(keyId: string): Promise<number> {
  const [row] = await c.db.query("SELECT SUM(count) AS n FROM rate_limit_counters WHERE key_id = ?", [keyId]);
  return Number(row.n ?? 0);
}

async function operationsOf(keyId: string): Promise<number> {
  const [row] = await c.db.query("SELECT COUNT(*) AS n FROM operations WHERE key_id = ?", [keyId]);
  return Number(row.n);
}

async function startEventsOf(keyId: string): Promise<number> {
  const [row] = await c.db.query(
    "SELECT COUNT(*) AS n FROM audit_events WHERE key_id = ? AND event_type = 'operation.exec'",
    [keyId],
  );
  return Number(row.n);
}

test.serial(
  "count with start - execs of a key admitted in its window: no admission round trip, each counted once",
  async (t) => {
    const { key, id } = await newKey(1000);
    await waitForMinuteRoom(5_000);
    const [url] = apiUrls();
    const before = await admissions(url);
    const first = await exec(url, key);
    t.is(first.status, 200, describe(first));
    for (let i = 0; i < 5; i++) {
      const res = await exec(url, key, { command: `echo run-${i}` });
      t.is(res.status, 200, describe(res));
      t.is(res.json.stdout, `run-${i}\n`);
    }
    const after = await admissions(url);
    t.is(moved(after, before, "full"), 1, "the first request of the window went the full way");
    t.is(moved(after, before, "on_row"), 5, "the others were admitted on the key's row");
    t.is(moved(after, before, "refused_on_start"), 0);
    t.is(await countOf(id), 6, "each request counted once, by its start's commit");
    t.is(await operationsOf(id), 6);
    t.is(await startEventsOf(id), 6);
  },
);

test.serial("count with start - exactly rate_limit execs pass across two api processes", async (t) => {
  const limit = 30;
  const { key, id } = await newKey(limit);
  await waitForMinuteRoom(10_000);
  const urls = apiUrls();
  const before = await Promise.all(urls.map(admissions));
  // One request through each process the full way: each then admits the key on its row.
  for (const url of urls) t.is((await exec(url, key)).status, 200);
  const answers = await Promise.all(
    Array.from({ length: 40 }, (_, i) => exec(urls[i % 2]!, key, { command: `echo ${i}` })),
  );
  const passed = answers.filter((r) => r.status === 200);
  const limited = answers.filter((r) => r.status === 429);
  t.is(passed.length, limit - 2, answers.map((r) => r.status).join(","));
  t.is(limited.length, 40 - (limit - 2));
  for (const r of limited) {
    t.regex(assertDetailOnly(t, r, 429), /rate limit exceeded: 30 requests per minute/);
    t.truthy(r.headers.get("retry-after"));
  }
  t.is(await countOf(id), 42, "every request counted once, refused ones too");
  t.is(await operationsOf(id), limit, "only the admitted ones ran");
  t.is(await startEventsOf(id), limit);
  const after = await Promise.all(urls.map(admissions));
  for (const i of [0, 1]) t.true(moved(after[i]!, before[i]!, "on_row") > 0, `api ${i} admitted on the row`);
});

test.serial(
  "count with start - a key revoked after its row was cached: the next exec is 401 and runs nothing",
  async (t) => {
    const { key, id, url } = await keyAdmittedOnce(5_000);
    const revoke = await request(c, `/api/automation-keys/${id}`, {
      method: "DELETE",
      key: null,
      headers: { "x-api-key": apiKey },
    });
    t.is(revoke.status, 204, describe(revoke));
    const before = await admissions(url);
    const res = await exec(url, key, { command: "echo must-not-run" });
    t.regex(assertDetailOnly(t, res, 401), /revoked/);
    const after = await admissions(url);
    t.is(moved(after, before, "on_row"), 1, "admitted on the cached row first");
    t.is(moved(after, before, "refused_on_start"), 1, "its start's guard refused it");
    t.is(await operationsOf(id), 1, "nothing ran");
    t.is(await countOf(id), 2, "counted once");
    const [refusal] = await c.db.query(
      "SELECT payload FROM audit_events WHERE key_id = ? AND event_type = 'auth.refused'",
      [id],
    );
    t.like(JSON.parse(String(refusal.payload)), { status: 401, code: "RC_ERR_KEY_REVOKED" });
  },
);

/**
 * A key of `limit` whose window process a admitted it in once (its row cached with room) and
 * process b used up the rest the full way: a's next request is admitted on the row.
 */
async function atLimitOnA(limit: number) {
  const k = await newKey(limit);
  const [a, b] = apiUrls();
  if ((await exec(a!, k.key)).status !== 200) throw new Error("first exec refused");
  for (let i = 0; i < limit - 1; i++) {
    const res = await request({ baseUrl: b!, key: k.key }, `/api/automation/v1/operations/${randomUUID()}`);
    if (res.status !== 404) throw new Error(`read: ${describe(res)}`);
  }
  return { ...k, a: a! };
}

test.serial(
  "count with start - a key at its limit: an invalid body is 429, not 422; a valid one runs nothing",
  async (t) => {
    const limit = 10;
    await waitForMinuteRoom(5_000);
    const first = await atLimitOnA(limit);
    const second = await atLimitOnA(limit);
    const before = await admissions(first.a);
    const invalid = await request({ baseUrl: first.a, key: first.key }, "/api/automation/v1/exec", {
      body: {},
    });
    assertDetailOnly(t, invalid, 429);
    t.truthy(invalid.headers.get("retry-after"));
    const valid = await exec(second.a, second.key, { command: "echo must-not-run" });
    assertDetailOnly(t, valid, 429);
    t.truthy(valid.headers.get("retry-after"));
    const after = await admissions(first.a);
    t.is(moved(after, before, "on_row"), 2, "both admitted on their key's row first");
    t.is(moved(after, before, "refused_on_start"), 1, "the valid one's start refused by its guard");
    t.is(moved(after, before, "full"), 2, "then both counted the full way");
    for (const k of [first, second]) {
      t.is(await countOf(k.id), limit + 1, "counted once");
      t.is(await operationsOf(k.id), 1, "only the first exec ran");
    }
  },
);

test.serial(
  "count with start - a server that is not connected and a wait that ends: counted once",
  async (t) => {
    const { key, id, url } = await keyAdmittedOnce(10_000);
    const offline = await c.addServer({ start: false });
    const before = await admissions(url);
    const notConnected = await exec(url, key, { server_id: offline.serverId });
    t.is(notConnected.status, 409, describe(notConnected));
    const slow = await exec(url, key, { command: "sleep 2; echo late", timeout_seconds: 1 });
    t.is(slow.status, 202, describe(slow));
    const after = await admissions(url);
    t.is(moved(after, before, "on_row"), 2);
    t.is(moved(after, before, "full"), 0, "their counts went with their starts");
    // The slow one's start was committed by the gateway or by the api when its wait ended: once.
    const operationId = String(slow.json.operation_id);
    let polls = 0;
    const finished = await pollUntil(
      async () => {
        polls++;
        const op = await request({ baseUrl: url, key }, `/api/automation/v1/operations/${operationId}`);
        return op.json.status === "completed" ? op : undefined;
      },
      { what: `operation ${operationId} completed`, timeoutMs: 20_000, intervalMs: 100 },
    );
    t.is((finished.json.result as { stdout?: string } | null)?.stdout, "late\n");
    t.is(await operationsOf(id), 3);
    t.is(await startEventsOf(id), 3);
    t.is(await countOf(id), 3 + polls, "three execs and each status read, each counted once");
  },
);

test.serial(
  "count with start - a request that goes away before its handler is counted all the same",
  async (t) => {
    const { key, id, url } = await keyAdmittedOnce(10_000);
    const before = await admissions(url);
    // Headers admit it on the key's row; its body never comes whole, and the caller hangs up: the
    // body's error (onError) counts it the full way.
    const { hostname, port } = new URL(url);
    const socket = connect(Number(port), hostname);
    await once(socket, "connect");
    socket.write(
      [
        "POST /api/automation/v1/exec HTTP/1.1",
        `Host: ${hostname}`,
        `Authorization: Bearer ${key}`,
        "Content-Type: application/json",
        "Content-Length: 100",
        "",
        "{",
      ].join("\r\n"),
    );
    await pollUntil(async () => moved(await admissions(url), before, "on_row") >= 1 || undefined, {
      what: "the request admitted on the key's row",
      timeoutMs: 10_000,
      intervalMs: 50,
    });
    socket.destroy();
    await pollUntil(async () => (await countOf(id)) >= 2 || undefined, {
      what: "the abandoned request counted",
      timeoutMs: 10_000,
      intervalMs: 50,
    });
    t.is(moved(await admissions(url), before, "full"), 1, "counted the full way when it ended");
    t.is(await countOf(id), 2);
    t.is(await operationsOf(id), 1);
  },
);
