// Admission of an automation key, in the order every route that takes one uses:
// who (401 for an unknown key), how often (429: every request of a known key
// counts in its window, refused ones too, so refusals cannot flood), then
// whether (401 revoked/expired, 403 IP). Scope checks of the server and the
// operation are the routes' own (they know what is asked).
//
// One database round trip per request once a key is known to this process: what
// is cached is only which key id a token hash belongs to (a key's id and hash
// never change). The key's row — revoked, expiry, scope, IP allowlist, rate
// limit — is read on every request, in the same round trip as the rate-limit
// increment and after it, so a revoke or change committed before a request
// arrives is what that request sees, on every api instance: nothing to
// invalidate, no staleness. The same read brings the tenant's audit chain head
// (outside any lock), the guess with which the operation the request may start
// commits in one round trip (audit/group-commit.ts; a stale guess only costs a
// retry the locking way).
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { noteChainHead } from "../audit/group-commit.js";
import { RcError } from "../errors.js";
import { KEY_ROW_COLUMNS, type KeyRow, actorOfKey, presentedKeyHash, principalOf } from "./automation-key.js";
import { ipAllowed } from "./ip-allowlist.js";
import { noteUse } from "./last-use.js";
import type { Principal } from "./principal.js";
import { countRequestReading, judge } from "./rate-limit.js";
import { enforceWindow } from "./security-audit.js";

/** The key's row and its tenant's chain head, read with every request's rate-limit increment (fixed text: db/statement.ts). */
const KEY_COLUMNS = KEY_ROW_COLUMNS.map((c) => `k.\`${c}\``).join(", ");
const HEAD_COLUMNS = "h.`head` AS `chain_head`, h.`seq` AS `chain_seq`";
const KEY_ROW_SQL = `SELECT ${KEY_COLUMNS}, ${HEAD_COLUMNS} FROM \`automation_keys\` k LEFT JOIN \`audit_chain_heads\` h ON h.\`tenant_id\` = k.\`tenant_id\` WHERE k.\`id\` = ?`;

type KeyRowWithHead = KeyRow & { chain_head: string | null; chain_seq: number | string | null };

/** Token hash → key id, per database; emptied when full (a miss costs one lookup). */
const keyIds = new WeakMap<Knex, Map<string, string>>();
const MAX_CACHED_KEYS = 10_000;

function idCache(db: Knex): Map<string, string> {
  let ids = keyIds.get(db);
  if (!ids) {
    ids = new Map();
    keyIds.set(db, ids);
  }
  return ids;
}

/** The key id of a token hash: cached, or looked up (401 for an unknown key, never cached). */
async function keyIdOf(db: Knex, hash: string): Promise<string> {
  const ids = idCache(db);
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
): Promise<Principal> {
  const hash = presentedKeyHash(req);
  const keyId = await keyIdOf(db, hash);
  const counted = await countRequestReading<KeyRowWithHead>(db, keyId, 60, () => ({
    sql: KEY_ROW_SQL,
    bindings: [keyId],
  }));
  const row = counted.rows[0];
  if (!row) {
    // The key is gone (its tenant deleted): unknown from now on.
    idCache(db).delete(hash);
    throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid automation key");
  }
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
