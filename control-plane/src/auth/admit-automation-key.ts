// Admission of an automation key, in the order every route that takes one uses:
// who (401 for an unknown key), how often (429: every request of a known key
// counts in its window, refused ones too, so refusals cannot flood), then
// whether (401 revoked/expired, 403 IP). Scope checks of the server and the
// operation are the routes' own (they know what is asked).
//
// The full way: one database round trip per request once a key is known to this
// process (which key id a token hash belongs to is cached: a key's id and hash
// never change). The key's row — revoked, expiry, scope, IP allowlist, rate
// limit — is read in the same round trip as the rate-limit increment and after
// it, so a revoke or change committed before a request arrives is what that
// request sees, on every api instance. The same read brings the tenant's audit
// chain head (outside any lock), the guess with which the operation the request
// may start commits in one round trip (audit/group-commit.ts; a stale guess only
// costs a retry the locking way), and the row's digest.
//
// On a route that declares `countWithStart` (an exec), a key admitted the full way
// in the current window is admitted with no round trip: on the row read then,
// its count made by the commit of the operation the request starts, guarded by
// the row's digest and the limit (auth/deferred-count.ts). Any refusal on that
// row, or anything but that commit, runs the full way before it is answered.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { noteChainHead } from "../audit/group-commit.js";
import { isMysql } from "../db/statement.js";
import { keyAdmissions } from "../observability/metrics.js";
import { RcError } from "../errors.js";
import { KEY_ROW_COLUMNS, type KeyRow, actorOfKey, presentedKeyHash, principalOf } from "./automation-key.js";
import { DeferredAdmission, KEY_DIGEST_SQL } from "./deferred-count.js";
import { ipAllowed } from "./ip-allowlist.js";
import { noteUse } from "./last-use.js";
import type { OperationScope } from "../operations/types.js";
import type { Principal } from "./principal.js";
import { countRequestReading, judge } from "./rate-limit.js";
import { enforceWindow } from "./security-audit.js";

/** The key's row and its tenant's chain head, read with every request's rate-limit increment (fixed text: db/statement.ts). */
const KEY_COLUMNS = KEY_ROW_COLUMNS.map((c) => `k.\`${c}\``).join(", ");
const HEAD_COLUMNS = "h.`head` AS `chain_head`, h.`seq` AS `chain_seq`";
const keyRowSql = (digest: string) =>
  `SELECT ${KEY_COLUMNS}, ${digest} AS \`key_digest\`, ${HEAD_COLUMNS} FROM \`automation_keys\` k LEFT JOIN \`audit_chain_heads\` h ON h.\`tenant_id\` = k.\`tenant_id\` WHERE k.\`id\` = ?`;
/** With the row's digest on MySQL/MariaDB; SQLite has no MD5 (and no count with a start: deferred-count.ts). */
const KEY_ROW_SQL = { mysql: keyRowSql(KEY_DIGEST_SQL), sqlite: keyRowSql("NULL") };

type KeyRowWithHead = KeyRow & {
  key_digest: string | null;
  chain_head: string | null;
  chain_seq: number | string | null;
};

/** The automation keys' window, in which every request counts. */
const WINDOW_SECONDS = 60;

/** A key's row as its last full admission in this process read it, and its window's count as known here. */
interface Admitted {
  row: KeyRowWithHead;
  windowStart: number;
  /** The window's count at that admission, plus the requests admitted on the row since. */
  known: number;
}

/**
 * Per database: token hash → key id (a miss costs one lookup), and key id → its last full
 * admission. Each is emptied when full.
 */
const caches = new WeakMap<Knex, { ids: Map<string, string>; admitted: Map<string, Admitted> }>();
const MAX_CACHED_KEYS = 10_000;

function cacheOf(db: Knex) {
  let c = caches.get(db);
  if (!c) {
    c = { ids: new Map(), admitted: new Map() };
    caches.set(db, c);
  }
  return c;
}

/**
 * Requests of a window admitted on a cached row at most: a tenth of the limit is
 * left to the full way, where other instances' requests show, so a guard at the
 * limit refuses rarely (a key with a limit of 9 or less is always admitted the full way).
 */
const onRowCeiling = (limit: number) => limit - Math.max(1, Math.ceil(limit / 10));

/** The key id of a token hash: cached, or looked up (401 for an unknown key, never cached). */
async function keyIdOf(db: Knex, hash: string): Promise<string> {
  const ids = cacheOf(db).ids;
  const cached = ids.get(hash);
  if (cached) return cached;
  const row = await db("automation_keys").where({ token_hash: hash }).first<{ id: string } | undefined>("id");
  if (!row) throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid automation key");
  if (ids.size >= MAX_CACHED_KEYS) ids.clear();
  ids.set(hash, row.id);
  return row.id;
}

export async function admitAutomationKey(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
  /** The route's start may carry the count (`countWithStart`; its scope): admit on a cached row when it can. */
  countWithStart?: { scope?: OperationScope },
): Promise<Principal> {
  const hash = presentedKeyHash(req);
  const keyId = await keyIdOf(db, hash);
  if (countWithStart && isMysql(db)) {
    const onRow = admitOnRow(db, req, reply, keyId, countWithStart.scope);
    if (onRow) return onRow;
  }
  return admitFully(db, req, reply, hash, keyId);
}

/** The full way: counted and the row read in one round trip, then judged. */
async function admitFully(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
  hash: string,
  keyId: string,
): Promise<Principal> {
  keyAdmissions.inc({ way: "full" });
  const sql = isMysql(db) ? KEY_ROW_SQL.mysql : KEY_ROW_SQL.sqlite;
  const counted = await countRequestReading<KeyRowWithHead>(db, keyId, WINDOW_SECONDS, () => ({
    sql,
    bindings: [keyId],
  }));
  const row = counted.rows[0];
  const { ids, admitted } = cacheOf(db);
  if (!row) {
    // The key is gone (its tenant deleted): unknown from now on.
    ids.delete(hash);
    admitted.delete(keyId);
    throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid automation key");
  }
  if (!admitted.has(keyId) && admitted.size >= MAX_CACHED_KEYS) admitted.clear();
  admitted.set(keyId, { row, windowStart: counted.windowStart, known: counted.count });
  req.keyActor = actorOfKey(row);
  if (row.chain_seq !== null)
    noteChainHead(db, row.tenant_id, { head: row.chain_head, seq: Number(row.chain_seq) });
  await enforceWindow(db, req.log, reply, req.keyActor, req.ip, judge(counted, Number(row.rate_limit)));
  const p = principalOf(row);
  if (!ipAllowed(p.ipAllowlist, req.ip)) {
    throw new RcError("RC_ERR_IP_NOT_ALLOWED", `caller IP ${req.ip} is not in this key's IP allowlist`);
  }
  noteUse(db, req.log, "automation_keys", row.id);
  return p;
}

/**
 * The request admitted on the row of the key's last full admission, its count
 * deferred to its start's commit; undefined when it must go the full way (no such
 * row in this window, near the limit, or a row that would refuse it: the full way
 * then says why, on the row as it is now).
 */
function admitOnRow(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
  keyId: string,
  scope: OperationScope | undefined,
): Principal | undefined {
  const admitted = cacheOf(db).admitted.get(keyId);
  if (!admitted) return undefined;
  const { row } = admitted;
  if (row.key_digest === null) return undefined;
  const now = Date.now();
  const windowStart = Math.floor(now / (WINDOW_SECONDS * 1000)) * WINDOW_SECONDS * 1000;
  if (admitted.windowStart !== windowStart || admitted.known >= onRowCeiling(Number(row.rate_limit)))
    return undefined;
  if (row.revoked_at !== null || (row.expires_at !== null && Number(row.expires_at) <= now)) return undefined;
  const p = principalOf(row);
  if (!ipAllowed(p.ipAllowlist, req.ip)) return undefined;
  admitted.known++;
  keyAdmissions.inc({ way: "on_row" });
  req.keyActor = actorOfKey(row);
  const count = {
    key_id: keyId,
    window_seconds: WINDOW_SECONDS,
    window_start: windowStart,
    digest: row.key_digest,
  };
  const full = async (r: FastifyRequest, rep: FastifyReply) => {
    const hash = presentedKeyHash(r);
    r.principal = await admitFully(db, r, rep, hash, await keyIdOf(db, hash));
    return { changed: cacheOf(db).admitted.get(keyId)?.row.key_digest !== count.digest };
  };
  req.deferredAdmission = new DeferredAdmission(count, req, reply, full, scope);
  noteUse(db, req.log, "automation_keys", row.id);
  return p;
}
