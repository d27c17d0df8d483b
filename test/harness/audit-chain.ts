// The audit chain recomputed the way the operator docs describe it, written here
// independently of the control plane's code, so tests check the stored hashes
// against the documented format and can rewrite a chain as an intruder would.
import { createHash, createHmac, hkdfSync } from "node:crypto";
import { TEST_MASTER_KEY } from "./control-plane";
import type { Row } from "./mariadb";

/** The chain key as documented: HKDF-SHA256 of the master key, label "relayctl audit chain v1". */
export const CHAIN_KEY = Buffer.from(
  hkdfSync("sha256", Buffer.from(TEST_MASTER_KEY, "base64"), Buffer.alloc(0), "relayctl audit chain v1", 32),
);

/** Sorted-key JSON. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((value as Row)[k])}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

/** An event's hash from its row and the previous hash: HMAC with `key`, plain SHA-256 without. */
export function eventHash(row: Row, prev: string | null, key?: Buffer): string {
  const fields = {
    seq: Number(row.seq),
    event_type: row.event_type,
    operation_id: row.operation_id,
    key_id: row.key_id,
    server_id: row.server_id,
    run_id: row.run_id,
    payload: row.payload,
    created_at: Number(row.created_at),
  };
  const h = key ? createHmac("sha256", key) : createHash("sha256");
  return h.update(`${prev ?? ""}\n${canonical(fields)}`).digest("hex");
}
