// A cluster's set-up steps (its tenant, automation keys, join tokens) run in the test process
// through the functions `relayctl-server admin` calls, with the CLI's defaults, instead of one
// CLI process per step: each process loads the whole control plane (~1.2 s of CPU measured
// here) and every cluster took three or more, while the set-up is not what those tests test.
// The CLI itself stays tested through processes (admin-cli.test.ts, cluster.admin()).
import { resolveAuditKeys, useAuditKeys } from "../../control-plane/src/audit/chain-key";
import { createAutomationKey, createJoinToken, createTenant } from "../../control-plane/src/cli/admin";
import { type Db, openDb } from "../../control-plane/src/db/knex";
import { onCleanup } from "./cleanup";
import { TEST_MASTER_KEY, admin } from "./control-plane";

type Answer = Record<string, unknown>;
type Step = (db: Db, flags: Map<string, string>) => Promise<Answer>;

const need = (flags: Map<string, string>, flag: string): string => {
  const value = flags.get(flag);
  if (value === undefined) throw new Error(`admin step: ${flag} is required`);
  return value;
};

/** The commands done in process, with `relayctl-server admin`'s defaults (cli/main.ts). */
const STEPS: Record<string, Step> = {
  "create-tenant": (db, f) => createTenant(db, need(f, "--name")),
  "create-automation-key": (db, f) =>
    createAutomationKey(db, {
      tenant: need(f, "--tenant"),
      name: need(f, "--name"),
      expiresAt: f.get("--expires-at"),
      rateLimit: Number(f.get("--rate-limit") ?? "100"),
    }),
  "create-join-token": (db, f) =>
    createJoinToken(db, {
      tenant: need(f, "--tenant"),
      serverName: need(f, "--server-name"),
      ttlMinutes: Number(f.get("--ttl-minutes") ?? "60"),
    }),
};

/** `--flag value` pairs; undefined when the arguments are anything else (the CLI is asked then). */
function pairs(args: string[]): Map<string, string> | undefined {
  if (args.length % 2 !== 0) return undefined;
  const flags = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) {
    if (!args[i]!.startsWith("--")) return undefined;
    flags.set(args[i]!, args[i + 1]!);
  }
  return flags;
}

/** TEST_MASTER_KEY's audit keys on MySQL, what the CLI resolves from the servers' environment. */
const keysFor = (databaseUrl: string) =>
  resolveAuditKeys({ databaseUrl, masterKey: Buffer.from(TEST_MASTER_KEY, "base64") });

/**
 * An `admin(args)` for a cluster's set-up on `databaseUrl` (already migrated): the steps above in
 * this process, anything else through the CLI. The process holds one set of audit keys, the ones
 * TEST_MASTER_KEY gives on MySQL, so a cluster whose servers get keys of their own (serverEnv with
 * RELAYCTL_MASTER_KEY or RELAYCTL_AUDIT_HMAC_KEY), or a SQLite database, uses the CLI throughout.
 */
export function setupAdmin(databaseUrl: string, serverEnv: Record<string, string> = {}) {
  const ownKeys = "RELAYCTL_MASTER_KEY" in serverEnv || "RELAYCTL_AUDIT_HMAC_KEY" in serverEnv;
  if (ownKeys || !databaseUrl.startsWith("mysql://")) return (args: string[]) => admin(databaseUrl, args);
  const keys = keysFor(databaseUrl);
  let db: Db | undefined;
  return async (args: string[]): Promise<Answer> => {
    const [command = "", ...rest] = args;
    const step = STEPS[command];
    const flags = pairs(rest);
    if (!step || !flags) return admin(databaseUrl, args);
    // The keys are a module global of the process: set before each step rather than once, since
    // other code in this process may have set others since (dispatch-refusal does, for SQLite).
    useAuditKeys(keys);
    if (!db) {
      const opened = openDb(databaseUrl);
      db = opened;
      onCleanup(() => opened.destroy());
    }
    try {
      return await step(db, flags);
    } catch (err) {
      throw new Error(`admin ${args.join(" ")} failed (in process): ${(err as Error).message}`, {
        cause: err,
      });
    }
  };
}
