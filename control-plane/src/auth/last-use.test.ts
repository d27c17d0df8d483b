// A credential's last use (last-use.ts) costs one UPDATE a minute, not one a
// request: on the SQLite store, a trigger counts the writes to the key's row
// while uses come at chosen times (the clock is an argument, not moved).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pollUntil } from "@relayctl/devkit";
import test from "ava";
import { resolveAuditKeys, useAuditKeys } from "../audit/chain-key.js";
import { createApiKey, createTenant } from "../cli/admin.js";
import { migrate, openDb } from "../db/knex.js";
import { createLogger } from "../lib/logger.js";
import { LAST_USE_RESOLUTION_MS, noteUse } from "./last-use.js";

test("last use - written at the first use, then at most once per minute per key", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-last-use-"));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  const db = openDb(url);
  t.teardown(async () => {
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  await migrate(db);
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  const tenant = await createTenant(db, "last-use");
  const { key_id: id } = await createApiKey(db, { tenant: tenant.tenant_id, name: "ci" });
  await db.raw("CREATE TABLE writes (n INTEGER)");
  await db.raw(
    "CREATE TRIGGER count_writes AFTER UPDATE OF last_used_at ON api_keys BEGIN INSERT INTO writes VALUES (1); END",
  );
  const log = createLogger("silent", {});
  const lastUsed = async () =>
    Number((await db("api_keys").where({ id }).first("last_used_at")).last_used_at);
  // The write is not awaited by the request: wait for it here.
  const settled = (at: number) =>
    pollUntil(async () => ((await lastUsed()) === at ? true : undefined), {
      what: `last_used_at ${at}`,
      timeoutMs: 5_000,
      intervalMs: 10,
    });

  const t0 = 1_800_000_000_000;
  noteUse(db, log, "api_keys", id, t0);
  await settled(t0);
  for (let ms = 1_000; ms < LAST_USE_RESOLUTION_MS; ms += 7_000) noteUse(db, log, "api_keys", id, t0 + ms);
  const later = t0 + LAST_USE_RESOLUTION_MS;
  noteUse(db, log, "api_keys", id, later);
  await settled(later);
  // SQLite runs the writes in order: any skipped use would have landed before the last one.
  t.is(Number((await db("writes").count("* as n").first())?.n), 2, "two writes for eleven uses");
});
