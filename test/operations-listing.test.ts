// Listings carry bounded output previews and page by size: many operations with ~1 MiB of
// control bytes on stdout and stderr (6x when JSON-escaped) once made GET /operations?run_id=
// and GET /api/audit build responses of hundreds of MB and answer 500 (RangeError: Invalid
// string length), taking the process's memory with them. The outputs here are made by real
// execs through the agent; the single-operation read still serves the whole output.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import test from "ava";
import { assertCompleted, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { api, exec, request } from "./harness/http";
import { pollUntil } from "./harness/wait";

const OPS = Number(process.env.LISTING_OPS ?? 48);
const PREVIEW = 2048;
const PAGE_LIMIT = 2 * 1024 * 1024;

let c: Cluster;
let apiKey: string;
const runId = `big-${Date.now()}`;
const ids: string[] = [];

/** Resident and peak memory (kB) of a process, from /proc. */
function memory(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
}

test.before(async () => {
  c = await startCluster();
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "listing"])).key);
  // Two real execs through the agent: 1.1 MB of NUL bytes on stdout, of 0x01 on stderr (the
  // agent caps each at 1 MiB) ...
  const command = "head -c 1100000 /dev/zero; head -c 1100000 /dev/zero | tr '\\0' '\\1' >&2";
  for (const _ of [1, 2]) {
    const res = await exec(c, { server_id: c.serverId, command, run_id: runId, timeout_seconds: 60 });
    if (res.status !== 200) throw new Error(`exec: ${describe(res)}`);
    ids.push(String(res.json.operation_id));
  }
  // ... copied inside the database into OPS operations with their two audit events each,
  // since this test is about the read path (streaming ~100 MB through the agent takes minutes
  // on a shared machine). The copies' events are not re-chained: nothing verifies here.
  const [head] = await c.db.query("SELECT seq FROM audit_chain_heads WHERE tenant_id = ?", [c.tenantId]);
  let seq = Number(head!.seq);
  const columns =
    "tenant_id, server_id, operation_type, status, delivery, key_id, run_id, exit_code, stdout, stderr, duration_ms, started_at, completed_at";
  for (let i = ids.length; i < OPS; i++) {
    const id = randomUUID();
    const from = ids[i % 2]!;
    await c.db.query(
      `INSERT INTO operations (id, ${columns}) SELECT ?, ${columns.replace("started_at", "started_at + ?")} FROM operations WHERE id = ?`,
      [id, i, from],
    );
    await c.db.query(
      `INSERT INTO audit_events (tenant_id, seq, event_type, operation_id, key_id, server_id, run_id, payload,
         prev_hash, hash, hash_alg, created_at)
       SELECT tenant_id, ? + (event_type = 'operation.completed'), event_type, ?, key_id, server_id, run_id,
         REPLACE(payload, ?, ?), prev_hash, hash, hash_alg, created_at
       FROM audit_events WHERE operation_id = ?`,
      [seq + 1, id, from, id, from],
    );
    seq += 2;
    ids.push(id);
  }
  await c.db.query("UPDATE audit_chain_heads SET seq = ? WHERE tenant_id = ?", [seq, c.tenantId]);
});
test.after.always(cleanupAll);

/** The control plane's logged causes of a 500 ("unhandled error" lines), for a failure's message. */
function unhandledErrors(cluster: Cluster): string {
  const lines = cluster
    .logText()
    .split("\n")
    .filter((l) => l.includes('"unhandled error"'))
    .map((l) => (l.length > 3000 ? `${l.slice(0, 1000)} … ${l.slice(-2000)}` : l));
  return lines.length ? `\nlogged:\n${lines.join("\n")}` : "";
}

interface Listed {
  operation_id: string;
  result: Record<string, unknown>;
}

test.serial("listing - GET /operations?run_id= pages many large outputs as bounded previews", async (t) => {
  const stored = await c.db.query(
    "SELECT MIN(LENGTH(stdout)) AS o, MIN(LENGTH(stderr)) AS e FROM operations WHERE run_id = ?",
    [runId],
  );
  t.true(Number(stored[0]!.o) > 1_000_000 && Number(stored[0]!.e) > 1_000_000, JSON.stringify(stored));

  const pid = c.api.proc.pid;
  const before = memory(pid);
  const seen: Listed[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await api(c, `/operations?run_id=${runId}${cursor ? `&cursor=${cursor}` : ""}`);
    if (res.status === 500)
      await pollUntil(async () => unhandledErrors(c) || undefined, {
        what: "the 500's log line",
        timeoutMs: 5_000,
        intervalMs: 100,
      }).catch(() => "");
    t.is(res.status, 200, `${describe(res)}${unhandledErrors(c)}`);
    t.true(res.text.length < PAGE_LIMIT, `page ${pages} is ${res.text.length} bytes`);
    seen.push(...(res.json.operations as Listed[]));
    cursor = res.json.next_cursor as string | null;
    pages++;
  } while (cursor !== null && pages < 50);
  const after = memory(pid);

  t.true(pages > 1, "the byte budget split the run into pages");
  t.deepEqual(seen.map((o) => o.operation_id).sort(), [...ids].sort(), "every operation exactly once");
  for (const op of seen) {
    t.like(op.result, { exit_code: 0, stdout_truncated: true, stderr_truncated: true });
    t.true(Number(op.result.stdout_bytes) > 1_000_000);
    t.true(Number(op.result.stderr_bytes) > 1_000_000);
    t.is(String(op.result.stdout).length, PREVIEW);
    t.is(String(op.result.stdout_tail).length, PREVIEW);
    t.is(String(op.result.stderr).length, PREVIEW);
    t.is(String(op.result.stderr), "\u0001".repeat(PREVIEW), "stderr is its own stream of 0x01 bytes");
  }
  // Listing ~100 MB of stored output may not take more than a few tens of MB.
  const grownKb = Math.max(after.rss - before.rss, after.hwm - before.hwm);
  t.true(
    grownKb < 64 * 1024,
    `api process memory grew by ${grownKb} kB (${JSON.stringify({ before, after })})`,
  );
});

test.serial("listing - GET /api/audit pages events with outcome previews by size", async (t) => {
  const pid = c.api.proc.pid;
  const before = memory(pid);
  const outcomes = new Map<string, number>();
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await request(
      c,
      `/api/audit?run_id=${runId}&limit=1000${cursor ? `&cursor=${cursor}` : ""}`,
      {
        key: null,
        headers: { "x-api-key": apiKey },
      },
    );
    if (res.status === 500)
      await pollUntil(async () => unhandledErrors(c) || undefined, {
        what: "the 500's log line",
        timeoutMs: 5_000,
        intervalMs: 100,
      }).catch(() => "");
    t.is(res.status, 200, `${describe(res)}${unhandledErrors(c)}`);
    t.true(res.text.length < PAGE_LIMIT, `page ${pages} is ${res.text.length} bytes`);
    for (const e of res.json.events as { operation_id: string; outcome: Record<string, unknown> }[]) {
      t.like(e.outcome, { status: "completed", stdout_truncated: true, stderr_truncated: true });
      t.is(String(e.outcome.stdout).length, PREVIEW);
      outcomes.set(e.operation_id, (outcomes.get(e.operation_id) ?? 0) + 1);
    }
    cursor = res.json.next_cursor as string | null;
    pages++;
  } while (cursor !== null && pages < 50);
  const after = memory(pid);
  t.true(pages > 1);
  t.deepEqual([...outcomes.keys()].sort(), [...ids].sort());
  t.true(
    [...outcomes.values()].every((n) => n === 2),
    "each operation's start and completion event once",
  );
  const grownKb = Math.max(after.rss - before.rss, after.hwm - before.hwm);
  t.true(
    grownKb < 64 * 1024,
    `api process memory grew by ${grownKb} kB (${JSON.stringify({ before, after })})`,
  );
});

test.serial("listing - GET /operations/{id} still serves the whole output", async (t) => {
  const res = await api(c, `/operations/${ids[0]}`);
  t.is(res.status, 200, describe(res));
  const [row] = await c.db.query("SELECT stdout, stderr FROM operations WHERE id = ?", [ids[0]]);
  const result = res.json.result as Record<string, unknown>;
  t.is(result.stdout, row!.stdout);
  t.is(result.stderr, row!.stderr);
  t.true(String(result.stdout).length > 1_000_000);
});

test.serial("listing - a short output is listed whole, not truncated", async (t) => {
  const res = await exec(c, {
    server_id: c.serverId,
    command: "echo short",
    run_id: `${runId}-s`,
    timeout_seconds: 30,
  });
  assertCompleted(t, res, { exit_code: 0, stdout: "short\n" });
  const list = await api(c, `/operations?run_id=${runId}-s`);
  t.deepEqual(list.json.next_cursor, null);
  t.like((list.json.operations as Listed[])[0]?.result, {
    stdout: "short\n",
    stdout_tail: null,
    stdout_bytes: 6,
    stdout_truncated: false,
    stderr: "",
    stderr_bytes: 0,
    stderr_truncated: false,
  });
});
