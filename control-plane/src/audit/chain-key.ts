// The key of the audit chain's HMAC, kept outside the database: whoever holds
// the database alone can then neither edit an event and recompute the chain nor
// forge a checkpoint. Where it comes from, first match wins:
//   1. RELAYCTL_AUDIT_HMAC_KEY (base64 of 32 bytes);
//   2. SQLite (`make dev`): a key file beside the database, `<db>.audit-key`,
//      made (0600) by the first process that needs it, so dev needs no setup;
//   3. RELAYCTL_MASTER_KEY, through HKDF-SHA256 with the label below, so an
//      installation that already has a master key gets a keyed chain for free.
// Without any of them, nothing can append an audit event (fail closed).
// The process holds one key, set once at boot (`useAuditKey`): every writer of
// the trail (operations, keys, sessions ...) appends through audit-log.ts.
import { hkdfSync, randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";

const CHAIN_LABEL = "relayctl audit chain v1";
const CHECKPOINT_LABEL = "relayctl audit checkpoint v1";
const BASE64_32 = /^[A-Za-z0-9+/]+={0,2}$/;

export class AuditKeyError extends Error {}

export interface AuditKeys {
  /** HMAC-SHA256 key of the chain. */
  chain: Buffer;
  /** HMAC-SHA256 key that signs exported checkpoints (derived from the chain key). */
  checkpoint: Buffer;
  source: "RELAYCTL_AUDIT_HMAC_KEY" | "sqlite key file" | "RELAYCTL_MASTER_KEY";
}

function derive(ikm: Buffer, label: string): Buffer {
  return Buffer.from(hkdfSync("sha256", ikm, Buffer.alloc(0), label, 32));
}

function decode32(name: string, value: string): Buffer {
  const raw = Buffer.from(value.trim(), "base64");
  if (!BASE64_32.test(value.trim()) || raw.length !== 32)
    throw new AuditKeyError(`${name}: must be the base64 of exactly 32 bytes (openssl rand -base64 32)`);
  return raw;
}

/** Reads the key file beside a SQLite database, making it on first use (the loser of a race reads the winner's). */
function sqliteKeyFile(databaseUrl: string): Buffer {
  const path = databaseUrl.slice("sqlite://".length);
  // An in-memory database lives as long as its process: so does its key (no file in the working dir).
  if (path === ":memory:" || path.startsWith("file::memory:")) return randomBytes(32);
  const file = `${path}.audit-key`;
  try {
    writeFileSync(file, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600, flag: "wx" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  return decode32(file, readFileSync(file, "utf8"));
}

/** The audit keys of this configuration; undefined when none can be had. */
export function resolveAuditKeys(opts: {
  databaseUrl: string;
  auditHmacKey?: string;
  masterKey?: Buffer;
}): AuditKeys | undefined {
  let chain: Buffer;
  let source: AuditKeys["source"];
  if (opts.auditHmacKey) {
    chain = decode32("RELAYCTL_AUDIT_HMAC_KEY", opts.auditHmacKey);
    source = "RELAYCTL_AUDIT_HMAC_KEY";
  } else if (opts.databaseUrl.startsWith("sqlite://")) {
    chain = sqliteKeyFile(opts.databaseUrl);
    source = "sqlite key file";
  } else if (opts.masterKey) {
    chain = derive(opts.masterKey, CHAIN_LABEL);
    source = "RELAYCTL_MASTER_KEY";
  } else {
    return undefined;
  }
  return { chain, checkpoint: derive(chain, CHECKPOINT_LABEL), source };
}

/** For the admin commands, which read only the database URL and these two variables. */
export function auditKeysFromEnv(
  databaseUrl: string,
  env: NodeJS.ProcessEnv = process.env,
): AuditKeys | undefined {
  return resolveAuditKeys({
    databaseUrl,
    auditHmacKey: env.RELAYCTL_AUDIT_HMAC_KEY || undefined,
    masterKey: env.RELAYCTL_MASTER_KEY ? decode32("RELAYCTL_MASTER_KEY", env.RELAYCTL_MASTER_KEY) : undefined,
  });
}

let current: AuditKeys | undefined;

/** Sets the process's audit keys (once at boot; again only in tests). */
export function useAuditKeys(keys: AuditKeys | undefined): void {
  current = keys;
}

export const NO_KEY_MESSAGE =
  "the audit chain has no key: set RELAYCTL_AUDIT_HMAC_KEY or RELAYCTL_MASTER_KEY (base64 of 32 bytes)";

/** The process's audit keys; throws when none were set, so no event is written unkeyed. */
export function auditKeys(): AuditKeys {
  if (!current) throw new AuditKeyError(NO_KEY_MESSAGE);
  return current;
}
