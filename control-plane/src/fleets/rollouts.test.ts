// Rollouts on the SQLite store and the in-process bus with no agent connected
// (test/fleets.test.ts runs real agents): a server whose agent never comes
// counts as failed at its deadline and halts the rollout; one rollout per
// application (409); an api instance that stops ends its rollouts failed; a
// claim whose operation was ended by someone else (the sweeper) is released.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pollUntil } from "@relayctl/devkit";
import anyTest, { type TestFn } from "ava";
import type { FastifyInstance } from "fastify";
import { buildApi } from "../api/app.js";
import { resolveAuditKeys, useAuditKeys } from "../audit/chain-key.js";
import { enrollAgent } from "../auth/agent-credentials.js";
import { MemoryBus } from "../bus/memory-bus.js";
import { createApiKey, createAutomationKey, createJoinToken, createTenant } from "../cli/admin.js";
import { loadConfig } from "../config.js";
import { type Db, migrate, openDb } from "../db/knex.js";
import { DeployService } from "../deployments/service.js";
import type { ApiContext } from "../http/context.js";
import { createLogger } from "../lib/logger.js";
import { OperationService } from "../operations/service.js";
import { RolloutService } from "./rollouts.js";

interface Ctx {
  app: FastifyInstance;
  api: ApiContext & { rollouts: RolloutService };
  db: Db;
  dir: string;
  key: string;
  apiKey: string;
  appId: string;
}
const test = anyTest as TestFn<Ctx>;

test.before(async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-rollouts-"));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  const db = openDb(url);
  await migrate(db);
  const config = loadConfig({ RELAYCTL_DATABASE_URL: url, RELAYCTL_BUS: "memory" });
  const bus = new MemoryBus();
  const log = createLogger("silent", {});
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  const ops = new OperationService(db, bus, log, config.leaseMs);
  const deploys = new DeployService(db, bus, ops, log, config.masterKey, config.leaseMs);
  const rollouts = new RolloutService(db, bus, ops, deploys, log);
  // The routes read ctx.rollouts per call: a test swaps in a new instance after closing one.
  const api = { config, db, bus, ops, deploys, rollouts };
  const app = await buildApi(api, log, () => []);
  const tenant = await createTenant(db, "fleet");
  const servers: string[] = [];
  for (const name of ["web-1", "web-2"]) {
    const { join_token } = await createJoinToken(db, {
      tenant: tenant.tenant_id,
      serverName: name,
      ttlMinutes: 5,
    });
    const e = await enrollAgent(db, { token: join_token, ip: "127.0.0.1", labels: { tier: "web" } });
    servers.push(e.server_id);
  }
  const { key } = await createAutomationKey(db, { tenant: tenant.tenant_id, name: "ci", rateLimit: 1000 });
  const apiKey = (await createApiKey(db, { tenant: tenant.tenant_id, name: "mgmt" })).key;
  const created = await app.inject({
    method: "POST",
    url: "/api/applications",
    headers: { "x-api-key": apiKey },
    payload: {
      name: "shop",
      server_id: servers[0],
      linked_container_name: "shop",
      container_port: 8080,
      git_repository: "https://git.example.test/shop.git",
      placement: { selector: "tier=web" },
    },
  });
  if (created.statusCode !== 201) throw new Error(created.body);
  t.context = { app, api, db, dir, key, apiKey, appId: created.json().id };
});

test.after.always(async (t) => {
  await t.context.app?.close();
  await t.context.api?.rollouts.close();
  await t.context.api?.deploys.close();
  await t.context.db?.destroy();
  if (t.context.dir) rmSync(t.context.dir, { recursive: true, force: true });
});

const deploy = (t: { context: Ctx }, body: Record<string, unknown>) =>
  t.context.app.inject({
    method: "POST",
    url: "/api/automation/v1/deploy",
    headers: { authorization: `Bearer ${t.context.key}` },
    payload: { application_id: t.context.appId, ...body },
  });
const rollout = async (t: { context: Ctx }, id: string) =>
  (
    await t.context.app.inject({
      method: "GET",
      url: `/api/applications/${t.context.appId}/rollouts/${id}`,
      headers: { "x-api-key": t.context.apiKey },
    })
  ).json();
const ended = (t: { context: Ctx }, id: string) =>
  pollUntil(
    async () => {
      const r = await rollout(t, id);
      return r.status === "running" ? undefined : r;
    },
    { what: `rollout ${id} to end`, timeoutMs: 30_000 },
  );
const serverStates = (r: { servers: { server_name: string; state: string }[] }) =>
  Object.fromEntries(r.servers.map((s) => [s.server_name, s.state]));

test.serial(
  "rollouts - a server whose agent never connects fails at its deadline and halts the rollout; a second rollout meanwhile is 409",
  async (t) => {
    const started = await deploy(t, { timeout_seconds: 1 });
    t.is(started.statusCode, 202, started.body);
    const { rollout_id, operation_id, deployment_id } = started.json();
    t.truthy(deployment_id);
    const again = await deploy(t, {});
    t.is(again.statusCode, 409, again.body);
    t.is(again.json().rollout_id, rollout_id);
    const r = await ended(t, rollout_id);
    t.is(r.status, "halted");
    t.deepEqual(serverStates(r), { "web-1": "failed", "web-2": "skipped" });
    t.is(r.servers[0].failed_step, "deadline");
    const op = await t.context.db("operations").where({ id: operation_id }).first();
    t.is(op.status, "failed");
    t.regex(op.stderr, /server 'web-1' failed at step deadline/);
    const events = await t.context
      .db("audit_events")
      .whereIn("event_type", ["rollout.started", "rollout.halted"])
      .select("event_type", "payload");
    t.deepEqual(events.map((e) => e.event_type).sort(), ["rollout.halted", "rollout.started"]);
    for (const e of events) t.is(JSON.parse(e.payload).rollout_id, rollout_id);
  },
);

test.serial(
  "rollouts - an api instance that stops ends its rollouts failed; a claim whose operation the sweeper ended is released",
  async (t) => {
    const { api } = t.context;
    const first = (await deploy(t, { timeout_seconds: 60 })).json();
    await api.rollouts.close();
    const stopped = await rollout(t, first.rollout_id);
    t.is(stopped.status, "failed");
    t.regex(stopped.detail, /control plane stopped/);
    const op = await t.context.db("operations").where({ id: first.operation_id }).first();
    t.is(op.status, "failed");

    api.rollouts = new RolloutService(api.db, api.bus, api.ops, api.deploys, createLogger("silent", {}));
    const second = (await deploy(t, { timeout_seconds: 60 })).json();
    t.truthy(second.rollout_id);
    // The sweeper ends the operation at its deadline while the claim is still held (an instance that died).
    await api.ops.fail(second.operation_id, "timeout", "hard deadline passed");
    const third = await deploy(t, { timeout_seconds: 1 });
    t.is(third.statusCode, 202, third.body);
    const stale = await rollout(t, second.rollout_id);
    t.is(stale.status, "failed");
    t.regex(stale.detail, /driver stopped/);
    await ended(t, third.json().rollout_id);
  },
);

test.serial(
  "rollouts - a claim whose operation is still being started holds the application: 409, released only once it is a minute old",
  async (t) => {
    const { db, appId } = t.context;
    const app = await db("applications").where({ id: appId }).first("tenant_id");
    const prior = await db("rollouts").first("strategy");
    const id = randomUUID();
    // As claimRollout leaves it before the operation is started: operation_id is its own id.
    await db("rollouts").insert({
      id,
      tenant_id: app.tenant_id,
      application_id: appId,
      kind: "deploy",
      strategy: prior.strategy,
      run_id: id,
      deadline_at: Date.now() + 60_000,
      created_at: Date.now(),
      operation_id: id,
      active_application_id: appId,
      status: "running",
    });
    const held = await deploy(t, { timeout_seconds: 1 });
    t.is(held.statusCode, 409, held.body);
    t.is(held.json().rollout_id, id);
    // An instance that stopped between the claim and the operation leaves it: a minute later it is stale.
    await db("rollouts")
      .where({ id })
      .update({ created_at: Date.now() - 61_000 });
    const next = await deploy(t, { timeout_seconds: 1 });
    t.is(next.statusCode, 202, next.body);
    t.regex((await rollout(t, id)).detail, /driver stopped/);
    await ended(t, next.json().rollout_id);
  },
);

test.serial(
  "rollouts - a fleet application counts as placed on each server its placement names: shown on the server, and its removal refused",
  async (t) => {
    const servers = (
      await t.context.app.inject({
        method: "GET",
        url: "/api/servers",
        headers: { "x-api-key": t.context.apiKey },
      })
    ).json().servers as { id: string; name: string }[];
    const web2 = servers.find((s) => s.name === "web-2")!;
    const page = await t.context.app.inject({
      method: "GET",
      url: `/api/servers/${web2.id}`,
      headers: { "x-api-key": t.context.apiKey },
    });
    t.deepEqual(
      page.json().applications.map((a: { name: string }) => a.name),
      ["shop"],
    );
    const removal = await t.context.app.inject({
      method: "DELETE",
      url: `/api/servers/${web2.id}`,
      headers: { "x-api-key": t.context.apiKey },
    });
    t.is(removal.statusCode, 409, removal.body);
    t.regex(removal.json().detail, /shop/);
  },
);
