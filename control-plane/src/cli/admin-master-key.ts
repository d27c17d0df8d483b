// `admin rotate-master-key`: re-seals every stored secret from RELAYCTL_MASTER_KEY
// (the old key) to a new one (RELAYCTL_NEW_MASTER_KEY or --new-key-file; never
// argv, which `ps` shows). `admin audit-hmac-key` prints the audit chain's key so
// an installation whose chain key is derived from the master key can pin it
// (RELAYCTL_AUDIT_HMAC_KEY) before rotating: otherwise the new master key would
// derive another chain key and `audit verify` would fail on every old event.
//
// Guarantees:
// - Nothing is written when any row opens under neither key: a first pass reads
//   every sealed value and the command refuses, naming the rows (ids only).
// - Rows are re-sealed in transactions of BATCH rows, each row locked (MySQL) and
//   updated only if it still holds the value that was read, so a concurrent
//   writer is never overwritten.
// - Interrupted, it is run again: a value that opens under the new key counts as
//   done (`already_new_key`) and is left alone, so a second run re-seals only the
//   rest, and a run after completion re-seals nothing.
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import type { Knex } from "knex";
import { auditKeysFromEnv } from "../audit/chain-key.js";
import { loadDatabaseUrl } from "../config.js";
import { isSqlite } from "../db/knex.js";
import { open, seal } from "../registry/crypto.js";
import { AdminError } from "./admin.js";

type WithDb = (fn: (db: Knex) => Promise<unknown>) => Promise<void>;

/** Every column sealed with registry/crypto.ts. A new sealed column belongs here (admin-master-key.test.ts checks). */
export const SEALED_COLUMNS: readonly SealedColumn[] = [
  { table: "registry_credentials", keys: ["id"], column: "password_ciphertext" },
  { table: "server_providers", keys: ["server_id"], column: "token_ciphertext" },
  { table: "applications", keys: ["id"], column: "git_password_sealed" },
  { table: "application_env", keys: ["application_id", "name"], column: "value_sealed" },
  { table: "deployments", keys: ["id"], column: "env_sealed" },
  { table: "application_preview_env", keys: ["application_id", "name"], column: "value_sealed" },
  { table: "forge_connections", keys: ["id"], column: "api_token_sealed" },
  { table: "forge_connections", keys: ["id"], column: "webhook_secret_sealed" },
];

interface SealedColumn {
  table: string;
  keys: string[];
  column: string;
}

const BATCH = 100;
const BASE64_32 = /^[A-Za-z0-9+/]+={0,2}$/;

type Row = Record<string, string>;
type State = "old" | "new" | "neither";

export interface ColumnCount {
  table: string;
  column: string;
  resealed: number;
  already_new_key: number;
}

export interface RotationResult {
  dry_run: boolean;
  resealed: number;
  already_new_key: number;
  columns: ColumnCount[];
}

export function decodeKey(what: string, value: string): Buffer {
  const v = value.trim();
  const raw = Buffer.from(v, "base64");
  if (!BASE64_32.test(v) || raw.length !== 32)
    throw new AdminError(`${what}: must be the base64 of exactly 32 bytes (openssl rand -base64 32)`);
  return raw;
}

function stateOf(keys: { old: Buffer; new: Buffer }, sealed: string): State {
  for (const which of ["new", "old"] as const) {
    try {
      open(keys[which], sealed);
      return which;
    } catch {
      // not this key
    }
  }
  return "neither";
}

const keyOf = (spec: SealedColumn, row: Row) => Object.fromEntries(spec.keys.map((k) => [k, row[k]]));
const describeRow = (spec: SealedColumn, row: Row) =>
  `${spec.table}.${spec.column} (${spec.keys.map((k) => `${k}=${row[k]}`).join(", ")})`;

async function sealedRows(db: Knex, spec: SealedColumn): Promise<Row[]> {
  return db(spec.table)
    .select([...spec.keys, spec.column])
    .whereNotNull(spec.column)
    .orderBy(spec.keys);
}

/** Re-seals one batch in one transaction; returns [resealed, already]. */
async function resealBatch(
  db: Knex,
  spec: SealedColumn,
  batch: Row[],
  keys: { old: Buffer; new: Buffer },
): Promise<[number, number]> {
  return db.transaction(async (trx) => {
    let resealed = 0;
    let already = 0;
    for (const listed of batch) {
      const q = trx(spec.table).first(spec.column).where(keyOf(spec, listed));
      const row = (await (isSqlite(db) ? q : q.forUpdate())) as Row | undefined;
      const sealed = row?.[spec.column];
      if (sealed === undefined || sealed === null) continue; // deleted or cleared since the first pass
      const state = stateOf(keys, sealed);
      if (state === "new") {
        already++;
        continue;
      }
      if (state === "neither")
        throw new AdminError(`${describeRow(spec, listed)} changed and no longer opens under either key`);
      const changed = await trx(spec.table)
        .where(keyOf(spec, listed))
        .where(spec.column, sealed)
        .update({ [spec.column]: seal(keys.new, open(keys.old, sealed)) });
      if (changed !== 1) throw new AdminError(`${describeRow(spec, listed)} changed while being re-sealed`);
      resealed++;
    }
    return [resealed, already];
  });
}

export async function rotateMasterKey(
  db: Knex,
  keys: { old: Buffer; new: Buffer },
  opts: { dryRun: boolean },
): Promise<RotationResult> {
  if (keys.old.equals(keys.new)) throw new AdminError("the new master key is the current one");
  const plan: { spec: SealedColumn; rows: Row[]; count: ColumnCount }[] = [];
  const unreadable: string[] = [];
  for (const spec of SEALED_COLUMNS) {
    const rows = await sealedRows(db, spec);
    const count = { table: spec.table, column: spec.column, resealed: 0, already_new_key: 0 };
    const pending: Row[] = [];
    for (const row of rows) {
      const state = stateOf(keys, row[spec.column]!);
      if (state === "new") count.already_new_key++;
      else if (state === "old") pending.push(row);
      else unreadable.push(describeRow(spec, row));
    }
    plan.push({ spec, rows: pending, count });
  }
  if (unreadable.length > 0) {
    throw new AdminError(
      `nothing re-sealed: ${unreadable.length} stored secret(s) open under neither RELAYCTL_MASTER_KEY nor the new key (is RELAYCTL_MASTER_KEY the key the control plane runs with?): ${unreadable.slice(0, 20).join("; ")}${unreadable.length > 20 ? "; ..." : ""}`,
    );
  }
  for (const { spec, rows, count } of plan) {
    if (opts.dryRun) {
      count.resealed = rows.length; // what a real run would re-seal
      continue;
    }
    for (let i = 0; i < rows.length; i += BATCH) {
      const [resealed, already] = await resealBatch(db, spec, rows.slice(i, i + BATCH), keys);
      count.resealed += resealed;
      count.already_new_key += already;
    }
  }
  const columns = plan.map((p) => p.count);
  return {
    dry_run: opts.dryRun,
    resealed: columns.reduce((n, c) => n + c.resealed, 0),
    already_new_key: columns.reduce((n, c) => n + c.already_new_key, 0),
    columns,
  };
}

/** The old and new keys from the environment (and --new-key-file), with the refusals an operator needs. */
function keysFromEnv(newKeyFile: string | undefined, env = process.env): { old: Buffer; new: Buffer } {
  if (!env.RELAYCTL_MASTER_KEY)
    throw new AdminError("RELAYCTL_MASTER_KEY is unset: set it to the key the control plane runs with now");
  let fresh = env.RELAYCTL_NEW_MASTER_KEY;
  if (newKeyFile) {
    try {
      fresh = readFileSync(newKeyFile, "utf8");
    } catch (err) {
      throw new AdminError(`--new-key-file ${newKeyFile}: ${(err as Error).message}`);
    }
  }
  if (!fresh)
    throw new AdminError(
      "no new key: set RELAYCTL_NEW_MASTER_KEY or pass --new-key-file (openssl rand -base64 32 > new.key)",
    );
  return {
    old: decodeKey("RELAYCTL_MASTER_KEY", env.RELAYCTL_MASTER_KEY),
    new: decodeKey(newKeyFile ? `--new-key-file ${newKeyFile}` : "RELAYCTL_NEW_MASTER_KEY", fresh),
  };
}

/** Refuses while the audit chain's key is derived from the master key (see the header). */
function requirePinnedAuditKey(): void {
  if (auditKeysFromEnv(loadDatabaseUrl())?.source !== "RELAYCTL_MASTER_KEY") return;
  throw new AdminError(
    "the audit chain's key is derived from RELAYCTL_MASTER_KEY, so a new master key would break `audit verify`: first set RELAYCTL_AUDIT_HMAC_KEY to the output of `relayctl-server admin audit-hmac-key` for every instance and for this command, then rotate",
  );
}

export function registerMasterKeyCommands(admin: Command, withDb: WithDb): void {
  admin
    .command("rotate-master-key")
    .description(
      "re-seal every stored secret from RELAYCTL_MASTER_KEY to the new key (RELAYCTL_NEW_MASTER_KEY or --new-key-file); safe to run again",
    )
    .option("--new-key-file <file>", "a file holding the new key (base64 of 32 bytes)")
    .option("--dry-run", "check every secret opens and count what would be re-sealed; write nothing")
    .action((o: { newKeyFile?: string; dryRun?: boolean }) => {
      const keys = keysFromEnv(o.newKeyFile);
      requirePinnedAuditKey();
      return withDb((db) => rotateMasterKey(db, keys, { dryRun: Boolean(o.dryRun) }));
    });
  admin
    .command("audit-hmac-key")
    .description(
      "print the audit chain's key (a secret): pin it as RELAYCTL_AUDIT_HMAC_KEY before rotating the master key",
    )
    .action(() =>
      withDb(async () => {
        const keys = auditKeysFromEnv(loadDatabaseUrl());
        if (!keys) throw new AdminError("the audit chain has no key: set RELAYCTL_MASTER_KEY");
        return { audit_hmac_key: keys.chain.toString("base64"), source: keys.source };
      }),
    );
}
