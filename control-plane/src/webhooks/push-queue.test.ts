// A fleet application's push that waits for a running rollout (push-queue.ts), on the SQLite
// store and the in-process bus with no agent connected (test/fleets-push.test.ts runs real
// agents and GitHub's payloads): what happens when the instance that should start it does not
// (it stopped: the next instance's sweep does), a start another instance holds, one that got
// as far as its rollout before its instance died, and an application gone before its turn.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import anyTest, { type TestFn } from "ava";
import type { FastifyInstance } from "fastify";
import { buildApi } from "../api/app.js";
import type { ApplicationRow } from "../applications/store.js";
import { resolveAuditKeys, useAuditKeys } from "../audit/chain-key.js";
import { enrollAgent } from "../auth/agent-credentials.js";
import { MemoryBus } from "../bus/memory-bus.js";
import { createApiKey, createJoinToken, createTenant } from "../cli/admin.js";
import { loadConfig } from "../config.js";
import { type Db, migrate, openDb } from "../db/knex.js";
import { DeployService } from "../deployments/service.js";
import { RolloutService } from "../fleets/rollouts.js";
import { createLogger } from "../lib/logger.js";
import { OperationService } from "../operations/service.js";
import { startQueuedPush, sweepQueuedPushes } from "./push-queue.js";
import { type PushDeployEnv, type PushedCommit, deployPushedCommit } from "./push-rules.js";

interface Ctx {
  db: Db;
  dir: string;
  app: FastifyInstance;
  apiKey: string;
  env: PushDeployEnv;
  make: () => RolloutService;
}
const test = anyTest as TestFn<Ctx>;
const log = createLogger("silent", {});

test.before(async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-push-queue-"));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  const db = openDb(url);
  await migrate(db);
  const config = loadConfig({ RELAYCTL_DATABASE_URL: url, RELAYCTL_BUS: "memory" });
  const bus = new MemoryBus();
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  const ops = new OperationService(db, bus, log, config.leaseMs);
  const deploys = new DeployService(db, bus, ops, log, config.masterKey, config.leaseMs);
  const make = () => new RolloutService(db, bus, ops, deploys, log);
  const rollouts = make();
  const app = await buildApi({ config, db, bus, ops, deploys, rollouts }, log, () => []);
  const tenant = await createTenant(db, "fleet");
  for (const name of ["web-1", "web-2"]) {
    const { join_token } = await createJoinToken(db, {
      tenant: tenant.tenant_id,
      serverName: name,
      ttlMinutes: 5,
    });
    await enrollAgent(db, { token: join_token, ip: "127.0.0.1", labels: { tier: "web" } });
  }
  const apiKey = (await createApiKey(db, { tenant: tenant.tenant_id, name: "mgmt" })).key;
  // No agent ever connects: each rollout's first deployment waits out its 60 s, so a rollout runs.
  const env: PushDeployEnv = { db, deploys, rollouts, deployTimeoutSeconds: 60, log };
  t.context = { db, dir, app, apiKey, env, make };
});

test.after.always(async (t) => {
  await t.context.env?.rollouts?.close();
  await t.context.env?.deploys.close();
  await t.context.app?.close();
  await t.context.db?.destroy();
  if (t.context.dir) rmSync(t.context.dir, { recursive: true, force: true });
});

/** A new fleet application (placement tier=web over both servers). */
async function fleetApp(t: { context: Ctx }, name: string): Promise<ApplicationRow> {
  const servers = await t.context.db("servers").select<{ id: string }[]>("id");
  const res = await t.context.app.inject({
    method: "POST",
    url: "/api/applications",
    headers: { "x-api-key": t.context.apiKey },
    payload: {
      name,
      server_id: servers[0]!.id,
      linked_container_name: name,
      container_port: 8080,
      git_repository: "https://git.example.test/shop.git",
      placement: { selector: "tier=web" },
    },
  });
  if (res.statusCode !== 201) throw new Error(res.body);
  return t.context.db("applications").where({ id: res.json().id }).first();
}

const pushed = (app: ApplicationRow, sha: string): PushedCommit => ({
  deliveryId: `delivery-${sha.slice(0, 6)}`,
  app,
  sha,
  before: null,
  actor: { type: "github_app", id: "1", name: "octocat" },
  audit: { github_delivery_id: `delivery-${sha.slice(0, 6)}` },
  commit: { message: `commit ${sha.slice(0, 6)}`, author: null },
  status: {
    table: "github_commit_statuses",
    row: { installation_id: 1, repository_id: 2, commit_sha: sha },
  },
});
const sha = (c: string) => c.repeat(40);
const running = (db: Db, appId: string) =>
  db("rollouts").where({ active_application_id: appId }).first<{ id: string } | undefined>("id");
const queueOf = (db: Db, appId: string) => db("fleet_push_queue").where({ application_id: appId }).first();
/** What the commit's forge is owed while it waits (queued-statuses.ts): state, description, link. */
const queuedStatusOf = async (db: Db, appId: string, commit: string) => {
  const r = await db("queued_commit_statuses").where({ application_id: appId, commit_sha: commit }).first();
  return r ? { state: r.state, description: r.description, link: r.link, context: r.context } : undefined;
};
const guardOf = (db: Db, appId: string, commit: string) =>
  db("github_push_deployments").where({ application_id: appId, commit_sha: commit }).first();

test.serial(
  "push queue - a push waiting for a rollout whose instance stopped is rolled out by the next instance's sweep",
  async (t) => {
    const { db, env } = t.context;
    const app = await fleetApp(t, "shop");
    const first = await deployPushedCommit(env, pushed(app, sha("a")));
    if (!("rolloutId" in first)) return t.fail(JSON.stringify(first));
    const waits = await deployPushedCommit(env, pushed(app, sha("b")));
    t.deepEqual(waits, { queued: { behindRolloutId: first.rolloutId!, superseded: null } });
    const newer = await deployPushedCommit(env, pushed(app, sha("c")));
    t.deepEqual(newer, { queued: { behindRolloutId: first.rolloutId!, superseded: sha("b") } });
    t.is((await queueOf(db, app.id)).commit_sha, sha("c"));
    t.is(await guardOf(db, app.id, sha("b")), undefined, "the replaced commit's guard is given back");
    // Its status: superseded; the waiting commit's: pending, linking to the rollout it waits for.
    t.deepEqual(await queuedStatusOf(db, app.id, sha("b")), {
      state: "error",
      description: "superseded by a newer push before it started",
      link: `applications/${app.id}`,
      context: "relayctl/shop",
    });
    t.deepEqual(await queuedStatusOf(db, app.id, sha("c")), {
      state: "pending",
      description: "waiting for the running rollout to end",
      link: `applications/${app.id}/rollouts/${first.rolloutId}`,
      context: "relayctl/shop",
    });
    t.is(await queuedStatusOf(db, app.id, sha("a")), undefined, "a push rolled out at once never waited");
    // A sweep while the rollout runs leaves the waiting push alone.
    await sweepQueuedPushes(env, log);
    t.is((await running(db, app.id))?.id, first.rolloutId);
    t.truthy(await queueOf(db, app.id));

    // The instance stops: its rollout ends failed, and nothing of this instance starts the next.
    await env.rollouts!.close();
    t.is(await running(db, app.id), undefined);
    t.truthy(await queueOf(db, app.id), "still waiting");
    // The next instance's sweep rolls it out.
    env.rollouts = t.context.make();
    await sweepQueuedPushes(env, log);
    const next = await running(db, app.id);
    t.truthy(next, "a rollout of the waiting commit runs");
    t.not(next!.id, first.rolloutId);
    t.is(await queueOf(db, app.id), undefined);
    const guard = await guardOf(db, app.id, sha("c"));
    t.truthy(guard.deployment_id, "the guard names the rollout's first deployment");
    const deployment = await db("deployments").where({ id: guard.deployment_id }).first();
    t.is(deployment.commit_ref, sha("c"));
    t.is(deployment.trigger, "webhook");
    // Rolled out: its rollout's status row speaks for the commit now, the waiting one is gone.
    t.is(await queuedStatusOf(db, app.id, sha("c")), undefined);
    t.truthy(await db("github_commit_statuses").where({ deployment_id: guard.deployment_id }).first());
  },
);

test.serial(
  "push queue - a start another instance holds is left to it; one that got its rollout before its instance died only leaves",
  async (t) => {
    const { db, env } = t.context;
    const app = await fleetApp(t, "cart");
    const row = {
      application_id: app.id,
      tenant_id: app.tenant_id,
      commit_sha: sha("d"),
      delivery_id: "delivery-d",
      behind_rollout_id: "gone",
      request: JSON.stringify({
        before: null,
        actor: { type: "github_app", id: null, name: "x" },
        audit: {},
        commit: { message: null, author: null },
        status: null,
      }),
      queued_at: Date.now(),
      claimed_until: Date.now() + 60_000,
    };
    await db("fleet_push_queue").insert(row);
    await sweepQueuedPushes(env, log);
    t.is(await running(db, app.id), undefined, "claimed by another instance: not started here");
    t.truthy(await queueOf(db, app.id));
    // Its claim expired, and its guard names a deployment: that instance started the rollout.
    await db("fleet_push_queue")
      .where({ application_id: app.id })
      .update({ claimed_until: Date.now() - 1 });
    await db("github_push_deployments").insert({
      application_id: app.id,
      commit_sha: sha("d"),
      before_sha: null,
      delivery_id: "delivery-d",
      deployment_id: "00000000-0000-4000-8000-00000000000d",
      created_at: Date.now(),
    });
    await startQueuedPush(env, app.id, log);
    t.is(await queueOf(db, app.id), undefined);
    t.is(await running(db, app.id), undefined, "not rolled out twice");
  },
);

test.serial(
  "push queue - an application deleted or made single-server before its turn drops the push",
  async (t) => {
    const { db, env } = t.context;
    const app = await fleetApp(t, "blog");
    const first = await deployPushedCommit(env, pushed(app, sha("e")));
    if (!("rolloutId" in first)) return t.fail(JSON.stringify(first));
    t.like(await deployPushedCommit(env, pushed(app, sha("f"))), {
      queued: { behindRolloutId: first.rolloutId },
    });
    await db("applications").where({ id: app.id }).update({ placement: null });
    await env.rollouts!.close();
    env.rollouts = t.context.make();
    await sweepQueuedPushes(env, log);
    t.is(await queueOf(db, app.id), undefined);
    t.is(await guardOf(db, app.id, sha("f")), undefined, "a later delivery of it is judged afresh");
    t.is(await running(db, app.id), undefined);
    t.like(await queuedStatusOf(db, app.id, sha("f")), {
      state: "error",
      description: "not rolled out: the application is no longer on a fleet",
      link: `applications/${app.id}`,
    });
  },
);
