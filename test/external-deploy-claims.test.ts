// The conflict guard's claims committed with the route_sync operation that
// carries them (control-plane/src/external-deploy/claim-start.ts), on a real
// MariaDB: on a guessed chain head the claims go in the operation's one round
// trip, made on the state rows as read before; a read another session's claim
// made stale is refused there and decided again under the rows' locks, so the
// contract's conflict still comes; two instances racing for one application
// never both claim it; and every started operation has its audit event, the
// chain verifying. The sync's last commit (entry-commit.ts, two round trips)
// lands its rows and its events together or neither.
import { randomUUID } from "node:crypto";
import test from "ava";
import type { Knex } from "knex";
import { guessStats, noteChainHead } from "../control-plane/src/audit/group-commit";
import { verifyTenantChain } from "../control-plane/src/audit/verify";
import { openDb } from "../control-plane/src/db/knex";
import { type ClaimStartSpec, claimAndStart } from "../control-plane/src/external-deploy/claim-start";
import { readStates } from "../control-plane/src/external-deploy/conflict-guard";
import { commitWithEvents } from "../control-plane/src/external-deploy/entry-commit";
import { ownedAuditDatabase, readHead, setup } from "./harness/group-commit";

const { keys, server } = ownedAuditDatabase(test);

async function fresh() {
  const url = (await server().createDatabase()).url;
  const db = openDb(url);
  const { tenantId, serverId } = await setup(db);
  return { url, db, tenantId, serverRef: { id: serverId, name: "s1" } };
}

/** The tenant's head as an automation key's admission reads it: the guess a batch commits on. */
async function guessHead(db: Knex, tenantId: string) {
  noteChainHead(db, tenantId, await readHead(db, tenantId));
}

function spec(
  base: Awaited<ReturnType<typeof fresh>>,
  sessionId: string,
  apps: string[],
  seen: ClaimStartSpec["seen"],
): ClaimStartSpec {
  return {
    tenantId: base.tenantId,
    sessionId,
    server: base.serverRef,
    keyId: null,
    runId: null,
    leaseMs: 60_000,
    deadlineSeconds: 120,
    candidates: apps.map((id) => ({
      applicationId: id,
      applicationName: `app-${id.slice(0, 4)}`,
      force: false,
    })),
    audit: (claimed) => ({ session_id: sessionId, routes: [...claimed].sort() }),
    seen,
  };
}

const holders = async (db: Knex, apps: string[]) =>
  (await db("application_route_state").whereIn("application_id", apps).orderBy("application_id")).map(
    (r) => r.last_session_id,
  );

test.serial("claims - taken with their operation in one round trip on a guessed head, audited", async (t) => {
  const base = await fresh();
  const { db, tenantId } = base;
  try {
    const apps = [randomUUID(), randomUUID()].sort();
    const session = randomUUID();
    const seen = await readStates(db, apps);
    await guessHead(db, tenantId);
    const guessed = guessStats(db).guessed;
    const { verdicts, op } = await claimAndStart(db, spec(base, session, apps, seen));
    t.is(guessStats(db).guessed, guessed + 1, "one round trip");
    t.truthy(op?.hint, "the gateway is told the head, as after OperationService.start");
    t.true(apps.every((id) => "claimed" in verdicts.get(id)!));
    t.deepEqual(await holders(db, apps), [session, session]);
    const row = await db("operations").where({ id: op!.id }).first();
    t.like(row, { operation_type: "route_sync", status: "running", tenant_id: tenantId });
    const events = await db("audit_events").where({ operation_id: op!.id }).select("event_type", "payload");
    t.deepEqual(
      events.map((e) => e.event_type),
      ["operation.route_sync"],
    );
    t.deepEqual(JSON.parse(events[0].payload).routes, apps);
    const report = await verifyTenantChain(db, tenantId, keys);
    t.true(report.ok, JSON.stringify(report));
  } finally {
    await db.destroy();
  }
});

test.serial(
  "claims - a read another session's claim made stale is refused in the round trip and decided under the locks: conflict",
  async (t) => {
    const base = await fresh();
    const { db, tenantId } = base;
    try {
      const app = randomUUID();
      const [a, b] = [randomUUID(), randomUUID()];
      const seenByA = await readStates(db, [app]); // free when A read it
      const won = await claimAndStart(db, spec(base, b, [app], await readStates(db, [app])));
      t.truthy(won.op);
      await guessHead(db, tenantId);
      const stale = guessStats(db).stale;
      const { verdicts, op } = await claimAndStart(db, spec(base, a, [app], seenByA));
      t.is(guessStats(db).stale, stale + 1, "the round trip found the row changed and committed nothing");
      t.is(op, undefined, "nothing started for the refused session");
      const v = verdicts.get(app)!;
      t.true("conflict" in v && v.conflict.includes(b), JSON.stringify(v));
      t.deepEqual(await holders(db, [app]), [b], "the winner's claim stands");
      t.is(Number((await db("operations").count({ n: "*" }).first())?.n), 1);
      const report = await verifyTenantChain(db, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
    } finally {
      await db.destroy();
    }
  },
);

test.serial(
  "claims - two instances racing for the same applications: each one claimed exactly once",
  async (t) => {
    const base = await fresh();
    const other = openDb(base.url);
    const { db, tenantId } = base;
    try {
      for (let round = 0; round < 20; round++) {
        const apps = [randomUUID(), randomUUID()];
        const sessions = [randomUUID(), randomUUID()];
        await Promise.all([guessHead(db, tenantId), guessHead(other, tenantId)]);
        const seen = await Promise.all([readStates(db, apps), readStates(other, apps)]);
        const outcomes = await Promise.all([
          claimAndStart(db, spec(base, sessions[0]!, apps, seen[0]!)),
          claimAndStart(other, spec(base, sessions[1]!, apps, seen[1]!)),
        ]);
        for (const app of apps) {
          const claimed = outcomes.filter((o) => "claimed" in o.verdicts.get(app)!);
          t.is(claimed.length, 1, `round ${round}: ${app}`);
        }
        const started = outcomes.filter((o) => o.op !== undefined).length;
        t.is(started, outcomes.filter((o) => [...o.verdicts.values()].some((v) => "claimed" in v)).length);
      }
      const report = await verifyTenantChain(db, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
    } finally {
      await Promise.all([db.destroy(), other.destroy()]);
    }
  },
);

test.serial("entry commit - rows and events land together, or neither when a statement fails", async (t) => {
  const base = await fresh();
  const { db, tenantId } = base;
  try {
    const app = randomUUID();
    const event = (type: string, n: number) => ({ tenantId, eventType: type, payload: { n } });
    const state = (port: number) => (q: Knex) => [
      q("application_route_state")
        .insert({ application_id: app, container_port: port })
        .onConflict("application_id")
        .merge(["container_port"]),
    ];
    await commitWithEvents(db, tenantId, state(8080), [event("test.entry", 1), event("test.entry", 2)]);
    t.is((await db("application_route_state").where({ application_id: app }).first()).container_port, 8080);
    const head = await db("audit_chain_heads").where({ tenant_id: tenantId }).first("seq");
    t.is(
      await db("audit_events")
        .where({ tenant_id: tenantId, event_type: "test.entry" })
        .count({ n: "*" })
        .first()
        .then((r) => Number(r?.n)),
      2,
    );
    await db.raw(
      "CREATE TRIGGER refuse_entries BEFORE INSERT ON `audit_events` FOR EACH ROW " +
        "IF NEW.event_type = 'test.refused' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF",
    );
    await t.throwsAsync(commitWithEvents(db, tenantId, state(9090), [event("test.refused", 3)]), {
      message: /refused by the test/,
    });
    t.is(
      (await db("application_route_state").where({ application_id: app }).first()).container_port,
      8080,
      "the row written before the refused events was rolled back",
    );
    t.deepEqual(await db("audit_chain_heads").where({ tenant_id: tenantId }).first("seq"), head);
    await db.raw("DROP TRIGGER refuse_entries");
    await commitWithEvents(db, tenantId, state(9191), [event("test.entry", 4)]);
    t.is((await db("application_route_state").where({ application_id: app }).first()).container_port, 9191);
    const report = await verifyTenantChain(db, tenantId, keys);
    t.true(report.ok, JSON.stringify(report));
  } finally {
    await db.destroy();
  }
});
