// A fleet push that waits for the running rollout, told to GitLab and Gitea/Forgejo
// (webhooks/queued-statuses.ts, forges/statuses.ts): `pending` with the rollout it waits
// for as its link, then each forge's word for a push that will not run (GitLab
// `canceled`, Gitea `error`) once a newer push took its place; a forge that keeps
// failing is given up on after its retries, as a deployment's status is. Against the
// forges' stand-ins (harness/forge-api.ts) on the SQLite store; test/fleets-push.test.ts
// runs the whole path with GitHub and real agents.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes, randomUUID } from "node:crypto";
import anyTest, { type TestFn } from "ava";
import type { ApplicationRow } from "../control-plane/src/applications/store";
import { resolveAuditKeys, useAuditKeys } from "../control-plane/src/audit/chain-key";
import { createTenant } from "../control-plane/src/cli/admin";
import { type Db, migrate, openDb } from "../control-plane/src/db/knex";
import { createConnection } from "../control-plane/src/forges/connections";
import type { ForgeContext } from "../control-plane/src/forges/context";
import { reportForgeStatuses } from "../control-plane/src/forges/statuses";
import { createLogger } from "../control-plane/src/lib/logger";
import type { PushedCommit } from "../control-plane/src/webhooks/push-rules";
import { statusQueued, statusSuperseded } from "../control-plane/src/webhooks/queued-statuses";
import { cleanupAll } from "./harness/cleanup";
import { type ForgeStandIn, startForgeStandIn } from "./harness/forge-api";

interface Ctx {
  db: Db;
  dir: string;
  ctx: ForgeContext;
  tenantId: string;
}
const test = anyTest as TestFn<Ctx>;
const TOKEN = "forge-token-for-queued-statuses";
const masterKey = randomBytes(32);

test.before(async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-forge-queued-"));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  const db = openDb(url);
  await migrate(db);
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  const tenant = await createTenant(db, "forges");
  const ctx = {
    db,
    log: createLogger("silent", {}),
    masterKey,
    publicUrl: "https://relayctl.example",
  } as unknown as ForgeContext;
  t.context = { db, dir, ctx, tenantId: tenant.tenant_id };
});

test.after.always(async (t) => {
  await t.context.db?.destroy();
  if (t.context.dir) rmSync(t.context.dir, { recursive: true, force: true });
  await cleanupAll();
});

async function forge(
  t: { context: Ctx },
  kind: "gitlab" | "gitea",
): Promise<{ f: ForgeStandIn; id: string }> {
  const f = await startForgeStandIn(kind, t.context.dir, TOKEN);
  const { row } = await createConnection(
    t.context.db,
    masterKey,
    t.context.tenantId,
    { kind, name: `${kind}-${randomUUID().slice(0, 6)}`, base_url: f.url, api_token: TOKEN },
    "test",
    {},
  );
  return { f, id: row.id };
}

function pushed(connectionId: string, project: string, sha: string): PushedCommit {
  const app = { id: randomUUID(), name: "shop" } as ApplicationRow;
  return {
    deliveryId: "d",
    app,
    sha,
    before: null,
    actor: { type: "forge", id: null, name: "dev" },
    audit: {},
    commit: { message: null, author: null },
    status: {
      table: "forge_commit_statuses",
      row: { connection_id: connectionId, project, commit_sha: sha, failures: 0 },
    },
  };
}

const rowsLeft = (db: Db) => db("queued_commit_statuses").count<{ n: number }[]>({ n: "*" });

for (const kind of ["gitlab", "gitea"] as const) {
  test.serial(
    `queued push status (${kind}) - pending while it waits, linking to the rollout; superseded in the forge's words`,
    async (t) => {
      const { db, ctx } = t.context;
      const { f, id } = await forge(t, kind);
      const project = kind === "gitlab" ? "group/shop" : "owner/shop";
      const sha = randomBytes(20).toString("hex");
      const c = pushed(id, project, sha);
      await statusQueued(db, c, "rollout-1");
      t.is(await reportForgeStatuses(ctx), 1);
      t.like(f.statuses.at(-1), {
        sha,
        token: TOKEN,
        context: "relayctl/shop",
        state: "pending",
        description: "waiting for the running rollout to end",
        target_url: `https://relayctl.example/app/applications/${c.app.id}/rollouts/rollout-1`,
      });
      t.is(await reportForgeStatuses(ctx), 0, "told once");
      await statusSuperseded(db, c.app.id, sha);
      t.is(await reportForgeStatuses(ctx), 1);
      t.like(f.statuses.at(-1), {
        sha,
        state: kind === "gitlab" ? "canceled" : "error",
        description: "superseded by a newer push before it started",
        target_url: `https://relayctl.example/app/applications/${c.app.id}`,
      });
      t.is(Number((await rowsLeft(db))[0]!.n), 0, "a final state told: nothing left owed");
    },
  );
}

test.serial(
  "queued push status - a forge that keeps failing is tried 3 times, then given up for that state",
  async (t) => {
    const { db, ctx } = t.context;
    const { f, id } = await forge(t, "gitea");
    const sha = randomBytes(20).toString("hex");
    const c = pushed(id, "owner/shop", sha);
    await statusQueued(db, c, "rollout-2");
    f.failStatuses(3);
    for (let pass = 0; pass < 3; pass++) t.is(await reportForgeStatuses(ctx), 0, `pass ${pass}`);
    t.is(f.refusedStatuses(), 3);
    t.is(await reportForgeStatuses(ctx), 0, "given up on pending: not posted again");
    // The next state is still told.
    await statusSuperseded(db, c.app.id, sha);
    t.is(await reportForgeStatuses(ctx), 1);
    t.is(f.statuses.filter((s) => s.sha === sha).length, 1);
    t.is(f.statuses.at(-1)!.state, "error");
  },
);
