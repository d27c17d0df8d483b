// Signed checkpoints of the audit chain heads, for operators to keep outside
// the database (a ticket, a log archive, another host). A checkpoint names a
// tenant's chain head (seq, hash) at a time, signed with HMAC-SHA256 under the
// checkpoint key (derived from the chain key, chain-key.ts). Later,
// `admin audit verify --checkpoint <file>` fails if the chain no longer holds
// that event with that hash: a chain cut back, or rewritten as a whole, shows.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { Knex } from "knex";
import { canonicalJson } from "./audit-log.js";
import type { AuditKeys } from "./chain-key.js";

export interface Checkpoint {
  version: 1;
  tenant_id: string;
  seq: number;
  hash: string | null;
  created_at: string;
  alg: "hmac-sha256";
  signature: string;
}

type Signed = Omit<Checkpoint, "signature" | "alg">;

function sign(keys: AuditKeys, c: Signed): string {
  const body = {
    version: c.version,
    tenant_id: c.tenant_id,
    seq: c.seq,
    hash: c.hash,
    created_at: c.created_at,
  };
  return createHmac("sha256", keys.checkpoint).update(canonicalJson(body)).digest("hex");
}

/** Checkpoints of the given tenants' chain heads, as they are now. */
export async function makeCheckpoints(db: Knex, keys: AuditKeys, tenantIds: string[]): Promise<Checkpoint[]> {
  const heads: { tenant_id: string; head: string | null; seq: number }[] = await db("audit_chain_heads")
    .whereIn("tenant_id", tenantIds)
    .orderBy("tenant_id")
    .select("tenant_id", "head", "seq");
  const createdAt = new Date().toISOString();
  return heads.map((h) => {
    const c: Signed = {
      version: 1,
      tenant_id: h.tenant_id,
      seq: Number(h.seq),
      hash: h.head,
      created_at: createdAt,
    };
    return { ...c, alg: "hmac-sha256", signature: sign(keys, c) };
  });
}

/** The checkpoints in a file written from `admin audit checkpoint` (its whole output, or one checkpoint). */
export function parseCheckpoints(text: string): Checkpoint[] {
  const parsed = JSON.parse(text) as { checkpoints?: unknown } | unknown[];
  const list = Array.isArray(parsed)
    ? parsed
    : ((parsed as { checkpoints?: unknown }).checkpoints ?? [parsed]);
  if (!Array.isArray(list)) throw new Error("no checkpoints in the file");
  return list as Checkpoint[];
}

/** Undefined when the chain still holds the checkpoint; else what is wrong. */
export async function checkCheckpoint(db: Knex, keys: AuditKeys, c: Checkpoint): Promise<string | undefined> {
  const expected = Buffer.from(sign(keys, c), "hex");
  const given = Buffer.from(String(c.signature ?? ""), "hex");
  if (c.version !== 1 || given.length !== expected.length || !timingSafeEqual(given, expected))
    return "its signature does not verify with this chain key (a forged or altered checkpoint, or another key)";
  if (c.seq === 0) return undefined;
  const row = await db("audit_events")
    .where({ tenant_id: c.tenant_id, seq: c.seq })
    .first<{ hash: string } | undefined>("hash");
  if (!row) return `event ${c.seq} of the checkpoint is no longer in the chain (the chain was cut back)`;
  if (row.hash !== c.hash)
    return `event ${c.seq} no longer has the checkpoint's hash (the chain was rewritten)`;
  return undefined;
}
