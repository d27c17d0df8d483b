// Without the GitHub App settings the control plane runs as before and every
// GitHub endpoint answers 503 RC_ERR_GITHUB_UNCONFIGURED (in-process api on the
// SQLite store, so migration 012 is exercised on SQLite too).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { buildApi } from "../api/app.js";
import { resolveAuditKeys, useAuditKeys } from "../audit/chain-key.js";
import { MemoryBus } from "../bus/memory-bus.js";
import { createApiKey, createTenant } from "../cli/admin.js";
import { loadConfig } from "../config.js";
import { migrate, openDb } from "../db/knex.js";
import { DeployService } from "../deployments/service.js";
import { createLogger } from "../lib/logger.js";
import { OperationService } from "../operations/service.js";

test("github - without the App settings its endpoints answer 503 and the rest works", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-gh-"));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  const db = openDb(url);
  t.teardown(async () => {
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  await migrate(db);
  const config = loadConfig({ RELAYCTL_DATABASE_URL: url, RELAYCTL_BUS: "memory" });
  t.is(config.github, undefined);
  const bus = new MemoryBus();
  const log = createLogger("silent", {});
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  const ops = new OperationService(db, bus, log, config.leaseMs);
  const deploys = new DeployService(db, bus, ops, log, config.masterKey, config.leaseMs);
  const app = await buildApi({ config, db, bus, ops, deploys }, log, () => []);
  t.teardown(() => app.close());
  const tenant = await createTenant(db, "gh");
  const apiKey = (await createApiKey(db, { tenant: tenant.tenant_id, name: "mgmt" })).key;
  const calls = [
    {
      method: "POST" as const,
      url: "/webhooks/github",
      payload: "{}",
      headers: { "content-type": "application/json" },
    },
    { method: "GET" as const, url: "/github/setup?installation_id=1&state=x" },
    { method: "POST" as const, url: "/api/github/install-link", headers: { "x-api-key": apiKey } },
    { method: "GET" as const, url: "/api/github/deliveries", headers: { "x-api-key": apiKey } },
    { method: "GET" as const, url: "/api/github/installations", headers: { "x-api-key": apiKey } },
  ];
  for (const c of calls) {
    const res = await app.inject(c);
    t.is(res.statusCode, 503, `${c.method} ${c.url}: ${res.body}`);
    t.regex(res.json().detail, /GitHub App is not configured/);
  }
  t.is(
    (await app.inject({ method: "GET", url: "/api/applications", headers: { "x-api-key": apiKey } }))
      .statusCode,
    200,
  );
});
