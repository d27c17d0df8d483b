// `relayctl-server admin audit verify` walks the keyed hash chain and finds what was changed
// behind the service's back: an edited event (even with every later hash recomputed without
// the key), a stored result edited beside the chain, events cut from the end, and a chain that
// no longer holds a signed checkpoint. The hashes are recomputed here independently of the
// control plane's code.
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { CHAIN_KEY, eventHash } from "./harness/audit-chain";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { TEST_MASTER_KEY } from "./harness/control-plane";
import { exec } from "./harness/http";
import { cleanEnv } from "./harness/process";
import { SERVER_MAIN } from "./harness/programs";

test.after.always(cleanupAll);

let cluster: Promise<Cluster> | undefined;
/**
 * A tenant of its own on the file's one cluster: verify and checkpoint are run with --tenant and
 * walk that tenant's chain alone, so each test tampers with its own chain while the processes
 * (and their start, ~5 s a cluster) are shared.
 */
async function ownTenant(): Promise<Cluster> {
  cluster ??= startCluster();
  return (await cluster).addTenant();
}

interface TenantReport {
  tenant_id: string;
  ok: boolean;
  seq?: number;
  problem?: string;
  operation_id?: string;
  events?: number;
  legacy_events?: number;
  results_checked?: number;
}
interface Verify {
  code: number;
  report: {
    ok: boolean;
    tenants: TenantReport[];
    checkpoints: { tenant_id: string; seq: number; ok: boolean; problem?: string }[];
  };
}

function run(
  c: Cluster,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [SERVER_MAIN, "admin", "audit", ...args],
      {
        env: cleanEnv({ RELAYCTL_DATABASE_URL: c.db.url, RELAYCTL_MASTER_KEY: TEST_MASTER_KEY, ...env }),
        timeout: 30_000,
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` }),
    );
  });
}

async function verify(c: Cluster, ...checkpointFiles: string[]): Promise<Verify> {
  const args = ["verify", "--tenant", c.tenantId, ...checkpointFiles.flatMap((f) => ["--checkpoint", f])];
  const { code, out } = await run(c, args);
  try {
    return { code, report: JSON.parse(out) };
  } catch {
    throw new Error(`audit verify printed no JSON (exit ${code}): ${out}`);
  }
}

/** `admin audit checkpoint`, saved to a file the way an operator would. */
async function checkpointFile(c: Cluster): Promise<string> {
  const { code, out } = await run(c, ["checkpoint", "--tenant", c.tenantId]);
  if (code !== 0) throw new Error(`audit checkpoint failed: ${out}`);
  const file = join(makeTempDir("checkpoint"), "checkpoint.json");
  writeFileSync(file, out);
  return file;
}

/**
 * Recomputes every hash of the tenant's chain from `fromSeq` on, the way someone holding the
 * database would, with `keyFor(seq)` (undefined: plain SHA-256) and `algFor(seq)` as hash_alg,
 * and points the chain head at the new last hash.
 */
async function rechain(
  c: Cluster,
  fromSeq: number,
  keyFor: (seq: number) => Buffer | undefined,
  algFor: (seq: number, alg: string) => string = (_s, alg) => alg,
): Promise<void> {
  const rows = await c.db.query("SELECT * FROM audit_events WHERE tenant_id = ? ORDER BY seq", [c.tenantId]);
  let prev: string | null = null;
  for (const row of rows) {
    const seq = Number(row.seq);
    if (seq >= fromSeq) {
      const hash = eventHash(row, prev, keyFor(seq));
      await c.db.query(
        "UPDATE audit_events SET prev_hash = ?, hash = ?, hash_alg = ? WHERE tenant_id = ? AND seq = ?",
        [prev, hash, algFor(seq, String(row.hash_alg)), c.tenantId, seq],
      );
      prev = hash;
    } else prev = String(row.hash);
  }
  await c.db.query("UPDATE audit_chain_heads SET head = ?, seq = ? WHERE tenant_id = ?", [
    prev,
    rows.length,
    c.tenantId,
  ]);
}

async function execEcho(c: Cluster, text: string): Promise<string> {
  const res = await exec(c, { server_id: c.serverId, command: `echo ${text}`, timeout_seconds: 30 });
  if (res.status !== 200) throw new Error(`exec: ${res.status} ${res.text}`);
  return String(res.json.operation_id);
}

async function seqOf(c: Cluster, operationId: string, eventType: string): Promise<number> {
  const [row] = await c.db.query("SELECT seq FROM audit_events WHERE operation_id = ? AND event_type = ?", [
    operationId,
    eventType,
  ]);
  return Number(row!.seq);
}

test.serial("audit verify - an untouched chain verifies; an edited event is found by its seq", async (t) => {
  const c = await ownTenant();
  const ids = [];
  for (const i of [1, 2, 3]) ids.push(await execEcho(c, String(i)));

  const clean = await verify(c);
  t.is(clean.code, 0);
  t.true(clean.report.ok);
  // key creation, enrollment, and a start and a completion event per exec
  t.true((clean.report.tenants[0]?.events ?? 0) >= 8);
  t.like(clean.report.tenants[0], { legacy_events: 0, results_checked: 3 });
  const keyed = await c.db.query("SELECT DISTINCT hash_alg FROM audit_events WHERE tenant_id = ?", [
    c.tenantId,
  ]);
  t.deepEqual(
    keyed.map((r) => r.hash_alg),
    ["hmac-sha256"],
  );

  const victim = await seqOf(c, ids[0]!, "operation.exec");
  await c.db.query(
    "UPDATE audit_events SET payload = REPLACE(payload, 'echo 1', 'echo 9') WHERE tenant_id = ? AND seq = ?",
    [c.tenantId, victim],
  );
  const edited = await verify(c);
  t.is(edited.code, 1);
  t.false(edited.report.ok);
  t.is(edited.report.tenants[0]?.seq, victim);
  t.regex(String(edited.report.tenants[0]?.problem), /edited/);
});

test.serial("audit verify - a removed last event is found through the chain head", async (t) => {
  const c = await ownTenant();
  await execEcho(c, "last");
  const [last] = await c.db.query("SELECT MAX(seq) AS seq FROM audit_events WHERE tenant_id = ?", [
    c.tenantId,
  ]);
  await c.db.query("DELETE FROM audit_events WHERE tenant_id = ? AND seq = ?", [c.tenantId, last!.seq]);
  const res = await verify(c);
  t.is(res.code, 1);
  t.regex(String(res.report.tenants[0]?.problem), /removed from the end/);
});

test.serial(
  "audit verify - a stored stdout edited beside the chain fails, naming the operation",
  async (t) => {
    const c = await ownTenant();
    await execEcho(c, "before");
    const id = await execEcho(c, "genuine-output");
    await execEcho(c, "after");
    t.is((await verify(c)).code, 0);

    await c.db.query("UPDATE operations SET stdout = ? WHERE id = ?", ["forged-output\n", id]);
    const res = await verify(c);
    t.is(res.code, 1);
    t.like(res.report.tenants[0], {
      ok: false,
      operation_id: id,
      seq: await seqOf(c, id, "operation.completed"),
    });
    t.regex(
      String(res.report.tenants[0]?.problem),
      new RegExp(`operation ${id}: the stored result .* edited`),
    );

    // The same holds for a forged exit code with the output left alone.
    await c.db.query("UPDATE operations SET stdout = ?, exit_code = 1 WHERE id = ?", [
      "genuine-output\n",
      id,
    ]);
    t.like((await verify(c)).report.tenants[0], { ok: false, operation_id: id });
  },
);

test.serial(
  "audit verify - an edited event with every later hash recomputed fails: the chain is keyed",
  async (t) => {
    const c = await ownTenant();
    const ids = [];
    for (const i of [1, 2, 3]) ids.push(await execEcho(c, `run-${i}`));
    const victim = await seqOf(c, ids[0]!, "operation.exec");
    const edit = (from: string, to: string) =>
      c.db.query("UPDATE audit_events SET payload = REPLACE(payload, ?, ?) WHERE tenant_id = ? AND seq = ?", [
        from,
        to,
        c.tenantId,
        victim,
      ]);

    // With the key, a rewrite verifies: the recomputation here is the control plane's own.
    await edit("echo run-1", "echo run-X");
    await rechain(c, victim, () => CHAIN_KEY);
    t.is((await verify(c)).code, 0, "a chain re-sealed with the real key verifies");

    // Without it (plain SHA-256, as the chain was before it was keyed), it does not.
    await edit("echo run-X", "echo run-Y");
    await rechain(c, victim, () => undefined);
    const res = await verify(c);
    t.is(res.code, 1);
    t.like(res.report.tenants[0], { ok: false, seq: victim });
    t.regex(String(res.report.tenants[0]?.problem), /edited/);

    // Nor when the rewritten events are also relabelled unkeyed after keyed ones.
    await rechain(
      c,
      victim,
      () => undefined,
      () => "sha256",
    );
    const relabelled = await verify(c);
    t.like(relabelled.report.tenants[0], { ok: false, seq: victim });
    t.regex(String(relabelled.report.tenants[0]?.problem), /not keyed but follows keyed events/);
  },
);

test.serial(
  "audit verify - events from before the chain was keyed verify as the chain's legacy start",
  async (t) => {
    const c = await ownTenant();
    await execEcho(c, "old");
    await execEcho(c, "new");
    // As migration 007 leaves an upgraded installation: the first events plain SHA-256.
    const legacy = 3;
    await rechain(
      c,
      1,
      (seq) => (seq <= legacy ? undefined : CHAIN_KEY),
      (seq, alg) => (seq <= legacy ? "sha256" : alg),
    );
    const res = await verify(c);
    t.is(res.code, 0, JSON.stringify(res.report));
    t.like(res.report.tenants[0], { ok: true, legacy_events: legacy });
  },
);

test.serial("audit verify - a chain cut back after a checkpoint fails with the checkpoint", async (t) => {
  const c = await ownTenant();
  await execEcho(c, "kept");
  const cut = await execEcho(c, "cut");
  const file = await checkpointFile(c);
  const ok = await verify(c, file);
  t.is(ok.code, 0, JSON.stringify(ok.report));
  const [head] = await c.db.query("SELECT seq FROM audit_chain_heads WHERE tenant_id = ?", [c.tenantId]);
  t.deepEqual(ok.report.checkpoints, [{ tenant_id: c.tenantId, seq: Number(head!.seq), ok: true }]);

  // Remove the last operation's two events and point the head at what is left.
  const from = await seqOf(c, cut, "operation.exec");
  await c.db.query("DELETE FROM audit_events WHERE tenant_id = ? AND seq >= ?", [c.tenantId, from]);
  const [last] = await c.db.query("SELECT hash FROM audit_events WHERE tenant_id = ? AND seq = ?", [
    c.tenantId,
    from - 1,
  ]);
  await c.db.query("UPDATE audit_chain_heads SET head = ?, seq = ? WHERE tenant_id = ?", [
    last!.hash,
    from - 1,
    c.tenantId,
  ]);
  t.is((await verify(c)).code, 0, "without a checkpoint the shorter chain is consistent");
  const res = await verify(c, file);
  t.is(res.code, 1);
  t.false(res.report.ok);
  t.like(res.report.checkpoints[0], { ok: false, seq: Number(head!.seq) });
  t.regex(String(res.report.checkpoints[0]?.problem), /cut back/);
});

test.serial("audit verify - a checkpoint catches a whole chain rewritten as unkeyed events", async (t) => {
  const c = await ownTenant();
  await execEcho(c, "one");
  const file = await checkpointFile(c);
  // Everything relabelled as from before the keying: consistent on its own ...
  await rechain(
    c,
    1,
    () => undefined,
    () => "sha256",
  );
  const alone = await verify(c);
  t.is(alone.code, 0);
  t.is(alone.report.tenants[0]?.legacy_events, alone.report.tenants[0]?.events);
  // ... but the checkpoint's keyed head is gone.
  const res = await verify(c, file);
  t.is(res.code, 1);
  t.regex(String(res.report.checkpoints[0]?.problem), /rewritten/);
});

test.serial("audit verify - a forged checkpoint is refused; verify needs the chain key", async (t) => {
  const c = await ownTenant();
  await execEcho(c, "x");
  const file = await checkpointFile(c);
  const { readFileSync } = await import("node:fs");
  const doc = JSON.parse(readFileSync(file, "utf8")) as { checkpoints: Record<string, unknown>[] };
  doc.checkpoints[0]!.seq = 1;
  const forged = join(makeTempDir("checkpoint"), "forged.json");
  writeFileSync(forged, JSON.stringify(doc));
  const res = await verify(c, forged);
  t.is(res.code, 1);
  t.regex(String(res.report.checkpoints[0]?.problem), /signature/);

  const keyless = await run(c, ["verify", "--tenant", c.tenantId], { RELAYCTL_MASTER_KEY: "" });
  t.is(keyless.code, 1);
  t.regex(keyless.out, /audit chain has no key/);
});

test("audit key - serve on MySQL without an audit key or master key does not start", async (t) => {
  const res = await new Promise<{ code: number; out: string }>((resolve) => {
    execFile(
      process.execPath,
      [SERVER_MAIN, "serve"],
      { env: cleanEnv({ RELAYCTL_DATABASE_URL: "mysql://root@127.0.0.1:9/none" }), timeout: 30_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` }),
    );
  });
  t.is(res.code, 2);
  t.regex(res.out, /config: the audit chain has no key: set RELAYCTL_AUDIT_HMAC_KEY or RELAYCTL_MASTER_KEY/);
});
