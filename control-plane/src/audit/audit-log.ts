// The tamper-evident audit trail. Each event carries the hash of the previous
// event of its tenant: hash = HMAC-SHA256(chain key, prev_hash + "\n" +
// canonical JSON of the event), with the key kept outside the database
// (chain-key.ts), so an edited event cannot be re-chained by whoever holds the
// database. Events written before the chain was keyed keep their plain SHA-256
// (hash_alg "sha256", migration 007) and verify as such. Appends lock the
// tenant's chain head, so the chain stays linear with several control-plane
// instances writing at once.
import { type KeyObject, createHash, createHmac, createSecretKey } from "node:crypto";
import type { Knex } from "knex";
import { type Statement, compiled, insertRows, isMysql, isStatement, queryOn } from "../db/statement.js";
import { auditKeys } from "./chain-key.js";

/** How an event's hash was made: keyed now, plain SHA-256 before migration 007. */
export type HashAlg = "hmac-sha256" | "sha256";
export const KEYED: HashAlg = "hmac-sha256";

export interface AuditEventInput {
  tenantId: string;
  eventType: string;
  operationId?: string | null;
  keyId?: string | null;
  serverId?: string | null;
  runId?: string | null;
  /** Never put a secret or an env value in here: key names only. */
  payload: Record<string, unknown>;
}

/** JSON with object keys sorted at every level, so the hash is reproducible. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    // Built in one pass (no entry arrays): every audited write hashes its event here.
    // sort() without a comparator orders strings by UTF-16 code units, as `<` does.
    const o = value as Record<string, unknown>;
    const keys = Object.keys(o);
    // Keys already in order and nothing nested but lists of plain values: JSON.stringify
    // writes the same text (its key order is Object.keys's), ~3x faster (the entries of
    // a sync's audit event are made so: external-deploy/sync.ts).
    if (flatInOrder(o, keys)) return JSON.stringify(o);
    let out = "{";
    for (const k of keys.sort()) {
      const v = o[k];
      if (v === undefined) continue;
      out += `${out.length > 1 ? "," : ""}${JSON.stringify(k)}:${canonicalJson(v)}`;
    }
    return `${out}}`;
  }
  return JSON.stringify(value ?? null);
}

/** A string, finite or not number, boolean, null or undefined: JSON.stringify and canonicalJson agree on it. */
function plainValue(v: unknown): boolean {
  const t = typeof v;
  return v === null || t === "string" || t === "number" || t === "boolean" || t === "undefined";
}

/**
 * Whether JSON.stringify(o) is canonicalJson(o): a plain object, its keys in
 * code-unit order already (so no integer-like key precedes another: Object.keys
 * puts those first, in numeric order), and every value plain or a dense list of
 * plain values (a hole is `null` in JSON.stringify, nothing in canonicalJson's join).
 */
function flatInOrder(o: Record<string, unknown>, keys: string[]): boolean {
  // A plain object only: JSON.stringify unwraps a boxed String or Number, or calls a toJSON.
  const proto = Object.getPrototypeOf(o);
  if ((proto !== Object.prototype && proto !== null) || "toJSON" in o) return false;
  for (let i = 0; i < keys.length; i++) {
    if (i > 0 && !(keys[i - 1]! < keys[i]!)) return false;
    const v = o[keys[i]!];
    if (plainValue(v)) continue;
    if (!Array.isArray(v) || typeof (v as { toJSON?: unknown }).toJSON === "function") return false;
    for (let j = 0; j < v.length; j++) {
      const e = v[j];
      if (!plainValue(e) || (e === undefined && !(j in v))) return false;
    }
  }
  return true;
}

export interface ChainedFields {
  seq: number;
  event_type: string;
  operation_id: string | null;
  key_id: string | null;
  server_id: string | null;
  run_id: string | null;
  payload: string;
  created_at: number;
}

/**
 * The chain key as a KeyObject, made once per key: on Node 24 createHmac with a Buffer key costs
 * ~26-38 µs (the key is checked and imported each time) against ~4-6 µs with a KeyObject, and
 * every audited write hashes its events here.
 */
const keyObjects = new WeakMap<Buffer, KeyObject>();

function keyObjectOf(key: Buffer): KeyObject {
  let k = keyObjects.get(key);
  if (!k) {
    k = createSecretKey(key);
    keyObjects.set(key, k);
  }
  return k;
}

/** The event's hash: HMAC-SHA256 with `key`, or the legacy plain SHA-256 without one. */
export function eventHash(prevHash: string | null, fields: ChainedFields, key?: Buffer): string {
  const h = key ? createHmac("sha256", keyObjectOf(key)) : createHash("sha256");
  return h.update(`${prevHash ?? ""}\n${canonicalJson(fields)}`).digest("hex");
}

/** Locks the tenant's chain head for the rest of the transaction (appends stay linear). */
export async function lockChainHead(trx: Knex.Transaction, tenantId: string) {
  const chain = await trx("audit_chain_heads")
    .where({ tenant_id: tenantId })
    .forUpdate()
    .first<{ head: string | null; seq: number }>("head", "seq");
  if (!chain) throw new Error(`audit: tenant ${tenantId} has no audit chain`);
  return { head: chain.head, seq: Number(chain.seq) };
}

function chainedFields(e: AuditEventInput, seq: number): ChainedFields {
  // Keys in code-unit order: the hash's canonical JSON of them is then one JSON.stringify.
  return {
    created_at: Date.now(),
    event_type: e.eventType,
    key_id: e.keyId ?? null,
    operation_id: e.operationId ?? null,
    payload: canonicalJson(e.payload),
    run_id: e.runId ?? null,
    seq,
    server_id: e.serverId ?? null,
  };
}

/**
 * Appends one event inside the caller's transaction. `together` are writes of
 * the same transaction that go with it (an operation's row): on MySQL they are
 * sent with the event in one multi-statement round trip, which matters on the
 * exec hot path (each round trip is ~0.5 ms on the machines measured).
 */
export async function appendAuditEvent(
  trx: Knex.Transaction,
  e: AuditEventInput,
  together: Knex.QueryBuilder[] = [],
): Promise<void> {
  const key = auditKeys().chain;
  const chain = await lockChainHead(trx, e.tenantId);
  await writeEvent(trx, key, chain, e, together);
}

/**
 * Locks the tenant's chain head, then runs `write` and appends the event it
 * returns, or nothing when it returns null. For a write whose audit depends on
 * its outcome (an operation's completion: only the update that wins is
 * audited), with the lock order of every append: chain head first, then rows.
 */
export async function appendAuditEventAfter(
  trx: Knex.Transaction,
  tenantId: string,
  write: () => Promise<AuditEventInput | null>,
): Promise<boolean> {
  const key = auditKeys().chain;
  const chain = await lockChainHead(trx, tenantId);
  const e = await write();
  if (!e) return false;
  if (e.tenantId !== tenantId) throw new Error("audit: the event belongs to another tenant's chain");
  await writeEvent(trx, key, chain, e, []);
  return true;
}

async function writeEvent(
  trx: Knex.Transaction,
  key: Buffer,
  chain: { head: string | null; seq: number },
  e: AuditEventInput,
  together: Knex.QueryBuilder[],
): Promise<void> {
  const fields = chainedFields(e, chain.seq + 1);
  const hash = eventHash(chain.head, fields, key);
  const writes = [
    ...together,
    trx("audit_events").insert({
      tenant_id: e.tenantId,
      ...fields,
      prev_hash: chain.head,
      hash,
      hash_alg: KEYED,
    }),
    trx("audit_chain_heads").where({ tenant_id: e.tenantId }).update({ head: hash, seq: fields.seq }),
  ];
  if (trx.client.config.client !== "mysql2") {
    for (const w of writes) await w;
    return;
  }
  const compiled = writes.map((w) => w.toSQL().toNative());
  await trx.raw(
    compiled.map((c) => c.sql).join(";\n"),
    compiled.flatMap((c) => c.bindings) as Knex.RawBinding[],
  );
}

/**
 * Appends several events of one tenant, in order, inside the caller's
 * transaction: one lock of the chain head, one multi-row insert, one head
 * update — a sync of 100 entries costs three round trips, not 300.
 */
export async function appendAuditEvents(trx: Knex.Transaction, events: AuditEventInput[]): Promise<void> {
  if (events.length === 0) return;
  const tenantId = events[0]!.tenantId;
  if (events.some((e) => e.tenantId !== tenantId)) throw new Error("audit: one batch, one tenant");
  await writeChainedEvents(trx, await lockChainHead(trx, tenantId), events);
}

/**
 * Chains `events` (one tenant's, in order) after `chain`, the head the caller
 * locked in this transaction (lockChainHead), and moves the head: one multi-row
 * insert and one head update (sent together on MySQL).
 */
export async function writeChainedEvents(
  trx: Knex.Transaction,
  chain: { head: string | null; seq: number },
  events: AuditEventInput[],
  /** Statements of the same transaction sent first, in the same round trip on MySQL. */
  before: Write[] = [],
): Promise<void> {
  if (events.length === 0) {
    await sendInOrder(trx, before);
    return;
  }
  const tenantId = events[0]!.tenantId;
  if (events.some((e) => e.tenantId !== tenantId)) throw new Error("audit: one batch, one tenant");
  const chained = chainRows(chain, events);
  if (isMysql(trx) && chained.rows.length <= 500) {
    await sendInOrder(trx, [...before, ...chainWrites(tenantId, chained)]);
    return;
  }
  await sendInOrder(trx, before);
  // SQLite caps bound parameters per statement (32766 on the bundled build): 12 columns x 500 rows fits.
  const { rows, head, seq } = chained;
  for (let i = 0; i < rows.length; i += 500) await trx("audit_events").insert(rows.slice(i, i + 500));
  await trx("audit_chain_heads").where({ tenant_id: tenantId }).update({ head, seq });
}

const EVENT_COLUMNS = [
  "tenant_id",
  "seq",
  "event_type",
  "operation_id",
  "key_id",
  "server_id",
  "run_id",
  "payload",
  "created_at",
  "prev_hash",
  "hash",
  "hash_alg",
] as const;

/**
 * The statements that append chained rows (chainRows) and move the tenant's head
 * to their last: one multi-row insert and one update, with fixed SQL text.
 */
export function chainWrites(tenantId: string, chained: ReturnType<typeof chainRows>): Statement[] {
  if (chained.rows.length === 0) return [];
  return [
    insertRows("audit_events", EVENT_COLUMNS, chained.rows),
    {
      sql: "UPDATE `audit_chain_heads` SET `head` = ?, `seq` = ? WHERE `tenant_id` = ?",
      bindings: [chained.head, chained.seq, tenantId],
    },
  ];
}

/** The rows of `events` chained after `chain` (one tenant's, in order), and the head they leave. */
export function chainRows(chain: { head: string | null; seq: number }, events: AuditEventInput[]) {
  const key = auditKeys().chain;
  let head = chain.head;
  let seq = chain.seq;
  const rows = events.map((e) => {
    const fields = chainedFields(e, ++seq);
    const prev = head;
    head = eventHash(prev, fields, key);
    return { tenant_id: e.tenantId, ...fields, prev_hash: prev, hash: head, hash_alg: KEYED };
  });
  return { rows, head, seq };
}

/** Bytes of SQL per multi-statement round trip at most (MariaDB's max_allowed_packet is 16 MiB by default). */
const ROUND_TRIP_BYTES = 4 * 1024 * 1024;

/** A write of a transaction: a knex query, or a statement with fixed SQL text (db/statement.ts). */
export type Write = Knex.QueryBuilder | Statement;

/**
 * Runs `writes` in order inside `trx`. On MySQL they go as multi-statement round
 * trips (up to ~4 MiB of SQL each): the server runs them one after the other
 * and stops at the first error, so nothing after a failed statement runs.
 */
export async function sendInOrder(
  trx: Knex | Knex.Transaction,
  writes: Write[],
  /** A connection outside knex's transactions (group-commit.ts): the statements run on it. */
  conn?: unknown,
  /** A statement after the last write, in the same round trip (COMMIT). */
  last?: string,
): Promise<void> {
  if (writes.length === 0 && !last) return;
  if (!isMysql(trx)) {
    for (const w of writes) await (isStatement(w) ? trx.raw(w.sql, w.bindings as Knex.RawBinding[]) : w);
    if (last) await trx.raw(last);
    return;
  }
  let sqls: string[] = [];
  let bindings: unknown[] = [];
  let bytes = 0;
  const flush = async () => {
    if (sqls.length === 0) return;
    const sql = sqls.join(";\n");
    // On a held connection, straight to mysql2: knex's raw() would scan the whole text for bindings again.
    if (conn) await queryOn(trx as Knex, conn, sql, bindings);
    else await trx.raw(sql, bindings as Knex.RawBinding[]);
    sqls = [];
    bindings = [];
    bytes = 0;
  };
  for (const w of writes) {
    const c = compiled(w);
    const size = c.sql.length + c.bindings.reduce<number>((n, b) => n + sizeOf(b), 0);
    if (bytes > 0 && bytes + size > ROUND_TRIP_BYTES) await flush();
    sqls.push(c.sql);
    for (const b of c.bindings) bindings.push(b);
    bytes += size;
  }
  if (last) sqls.push(last);
  await flush();
}

function sizeOf(b: unknown): number {
  if (typeof b === "string") return b.length * 2; // escaped, worst case
  if (Buffer.isBuffer(b)) return b.length * 2;
  return 24;
}
