// Operator commands for the audit trail: `admin audit verify` (chain links and
// HMACs, stored results against their completion events, and signed
// checkpoints given with --checkpoint) and `admin audit checkpoint` (signed
// checkpoints of the chain heads, to keep outside the database). Both need the
// chain key (RELAYCTL_AUDIT_HMAC_KEY, or its defaults: audit/chain-key.ts).
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import type { Knex } from "knex";
import { type Checkpoint, checkCheckpoint, makeCheckpoints, parseCheckpoints } from "../audit/checkpoint.js";
import { auditKeys } from "../audit/chain-key.js";
import { verifyTenantChain } from "../audit/verify.js";
import { AdminError, resolveTenant } from "./admin.js";

type WithDb = (fn: (db: Knex) => Promise<unknown>) => Promise<void>;

const collect = (value: string, previous: string[]) => [...previous, value];

async function tenantIds(db: Knex, tenant: string | undefined): Promise<string[]> {
  if (tenant) return [(await resolveTenant(db, tenant)).id];
  return (await db("tenants").orderBy("id").select("id")).map((t: { id: string }) => t.id);
}

function readCheckpointFiles(files: string[]): Checkpoint[] {
  return files.flatMap((file) => {
    try {
      return parseCheckpoints(readFileSync(file, "utf8"));
    } catch (err) {
      throw new AdminError(`--checkpoint ${file}: ${err instanceof Error ? err.message : String(err)}`);
    }
  });
}

export function registerAuditCommands(admin: Command, withDb: WithDb): void {
  const audit = admin.command("audit").description("audit trail tools");
  audit
    .command("verify")
    .description(
      "check each tenant's audit chain (links, HMACs), each finished operation's result against its completion event, and the checkpoints given; exit 1 at the first problem",
    )
    .option("--tenant <id|name>", "only this tenant")
    .option("--checkpoint <file>", "a file written from `admin audit checkpoint` (repeatable)", collect, [])
    .action((o: { tenant?: string; checkpoint: string[] }) =>
      withDb(async (db) => {
        const keys = auditKeys();
        const checkpoints = readCheckpointFiles(o.checkpoint);
        const tenants = [];
        for (const id of await tenantIds(db, o.tenant)) tenants.push(await verifyTenantChain(db, id, keys));
        const checked = [];
        for (const c of checkpoints) {
          const problem = await checkCheckpoint(db, keys, c);
          checked.push({ tenant_id: c.tenant_id, seq: c.seq, ok: !problem, ...(problem ? { problem } : {}) });
        }
        const ok = tenants.every((r) => r.ok) && checked.every((c) => c.ok);
        if (!ok) process.exitCode = 1;
        return { ok, tenants, checkpoints: checked };
      }),
    );
  audit
    .command("checkpoint")
    .description("print signed checkpoints of the chain heads (keep them outside the database)")
    .option("--tenant <id|name>", "only this tenant")
    .action((o: { tenant?: string }) =>
      withDb(async (db) => ({
        checkpoints: await makeCheckpoints(db, auditKeys(), await tenantIds(db, o.tenant)),
      })),
    );
}
