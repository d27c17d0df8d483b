#!/usr/bin/env node
// relayctl-server: `serve`, `migrate` and the operator's `admin` commands.
import { Command } from "commander";
import { auditKeysFromEnv, useAuditKeys } from "../audit/chain-key.js";
import { ConfigError, loadConfig, loadDatabaseUrl } from "../config.js";
import { migrateWithRetry, openDb } from "../db/knex.js";
import {
  AdminError,
  createApiKey,
  createAutomationKey,
  createJoinToken,
  createTenant,
  revokeApiKey,
  revokeAutomationKey,
} from "./admin.js";
import { registerAgentCommands } from "./admin-agents.js";
import { registerApplicationCommands } from "./admin-applications.js";
import { registerAuditCommands } from "./admin-audit.js";
import { registerMasterKeyCommands } from "./admin-master-key.js";
import { registerUserCommands } from "./admin-users.js";

const program = new Command()
  .name("relayctl-server")
  .description("relayctl control plane (api and gateway roles) and operator commands");

program
  .command("serve")
  .description("run the control plane (roles from RELAYCTL_ROLE); migrates the database first")
  .action(async () => {
    const config = loadConfig();
    // Loaded here, not at the top: the whole server is ~0.8 s of CPU that no admin command needs.
    const { serve } = await import("../serve.js");
    const running = await serve(config);
    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      process.stdout.write(`${JSON.stringify({ level: 30, msg: "stopping", signal })}\n`);
      await running.stop();
      process.exit(0);
    };
    process.on("SIGINT", () => void stop("SIGINT"));
    process.on("SIGTERM", () => void stop("SIGTERM"));
  });

program
  .command("migrate")
  .description("run database migrations and exit")
  .action(() => withDb(async () => ({ migrated: true })));

const admin = program.command("admin").description("operator commands (read RELAYCTL_DATABASE_URL)");

admin
  .command("create-tenant")
  .requiredOption("--name <name>", "tenant name")
  .action((o: { name: string }) => withDb((db) => createTenant(db, o.name)));

admin
  .command("create-automation-key")
  .requiredOption("--tenant <id|name>", "tenant id or name")
  .requiredOption("--name <name>", "a name for the key")
  .option("--expires-at <iso>", "expiry, an ISO 8601 date-time with a zone, in the future")
  .option("--rate-limit <n>", "requests per minute (1-1000)", "100")
  .action((o: { tenant: string; name: string; expiresAt?: string; rateLimit: string }) =>
    withDb((db) => createAutomationKey(db, { ...o, rateLimit: Number(o.rateLimit) })),
  );

admin
  .command("revoke-automation-key")
  .requiredOption("--key-id <id>", "automation key id")
  .action((o: { keyId: string }) => withDb((db) => revokeAutomationKey(db, o.keyId)));

admin
  .command("create-api-key")
  .description("create a regular API key (X-API-Key: rck_...) with full access to the tenant")
  .requiredOption("--tenant <id|name>", "tenant id or name")
  .requiredOption("--name <name>", "a name for the key")
  .action((o: { tenant: string; name: string }) => withDb((db) => createApiKey(db, o)));

admin
  .command("revoke-api-key")
  .requiredOption("--key-id <id>", "API key id")
  .action((o: { keyId: string }) => withDb((db) => revokeApiKey(db, o.keyId)));

admin
  .command("create-join-token")
  .requiredOption("--tenant <id|name>", "tenant id or name")
  .requiredOption("--server-name <name>", "name the enrolled server gets")
  .option("--ttl-minutes <n>", "minutes the token stays valid", "60")
  .action((o: { tenant: string; serverName: string; ttlMinutes: string }) =>
    withDb((db) => createJoinToken(db, { ...o, ttlMinutes: Number(o.ttlMinutes) })),
  );

registerAuditCommands(admin, withDb);
registerApplicationCommands(admin, withDb);
registerAgentCommands(admin, withDb);
registerUserCommands(admin, withDb);
registerMasterKeyCommands(admin, withDb);

async function withDb(fn: (db: ReturnType<typeof openDb>) => Promise<unknown>): Promise<void> {
  const url = loadDatabaseUrl();
  // Commands that write audit events, and the audit commands, need the chain key.
  useAuditKeys(auditKeysFromEnv(url));
  const db = openDb(url);
  try {
    await migrateWithRetry(db, { warn: () => {} });
    process.stdout.write(`${JSON.stringify(await fn(db))}\n`);
  } finally {
    await db.destroy();
  }
}

program.parseAsync().catch((err: unknown) => {
  if (err instanceof ConfigError) process.stderr.write(`relayctl-server: config: ${err.message}\n`);
  else if (err instanceof AdminError) process.stderr.write(`relayctl-server: ${err.message}\n`);
  else process.stderr.write(`relayctl-server: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
