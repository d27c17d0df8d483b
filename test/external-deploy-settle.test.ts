// A sync's entries settled with its route_sync operation's completion
// (control-plane/src/external-deploy/settle.ts), on a real MariaDB: the plan told
// with the job is stored in the completion's own commit (the entries' audit event
// chained right after operation.completed, the claims of refused routes given
// back), and the done event says so, with the chain head it left; without a plan,
// with one that does not fit, or for an operation already finished, nothing of it
// is stored and the done event says unsettled (the api then stores it itself).
import { randomUUID } from "node:crypto";
import { RouteOutcomeStatus } from "@relayctl/proto";
import test from "ava";
import type { Knex } from "knex";
import pino from "pino";
import { noteChainHead } from "../control-plane/src/audit/group-commit";
import { verifyTenantChain } from "../control-plane/src/audit/verify";
import type { OperationDone } from "../control-plane/src/bus/job-bus";
import { MemoryBus } from "../control-plane/src/bus/memory-bus";
import { openDb } from "../control-plane/src/db/knex";
import { claimAndStart } from "../control-plane/src/external-deploy/claim-start";
import { readStates } from "../control-plane/src/external-deploy/conflict-guard";
import { type SyncPlan, syncSettler } from "../control-plane/src/external-deploy/settle";
import type { StartedOperation } from "../control-plane/src/operations/outcome";
import { OperationService } from "../control-plane/src/operations/service";
import type { FinalResult } from "../control-plane/src/operations/store";
import { ownedAuditDatabase, readHead, setup } from "./harness/group-commit";

const { keys, server } = ownedAuditDatabase(test);
const log = pino({ level: "silent" });

interface Started {
  db: Knex;
  tenantId: string;
  serverId: string;
  sessionId: string;
  apps: string[];
  op: StartedOperation;
  plan: SyncPlan;
  ops: OperationService;
  bus: MemoryBus;
}

/** A fresh database, two applications claimed by one session and the route_sync carrying them started. */
async function started(t: { teardown: (f: () => Promise<void>) => void }): Promise<Started> {
  const db = openDb((await server().createDatabase()).url);
  t.teardown(() => db.destroy());
  const { tenantId, serverId } = await setup(db);
  const apps = [randomUUID(), randomUUID()];
  const sessionId = randomUUID();
  const seen = await readStates(db, apps);
  // The head as an automation key's admission leaves it: the start commits on it, and its hint carries it on.
  noteChainHead(db, tenantId, await readHead(db, tenantId));
  const { verdicts, op } = await claimAndStart(db, {
    tenantId,
    sessionId,
    server: { id: serverId, name: "s1" },
    keyId: null,
    runId: "run-1",
    leaseMs: 60_000,
    deadlineSeconds: 120,
    candidates: apps.map((id) => ({
      applicationId: id,
      applicationName: `app-${id.slice(0, 4)}`,
      force: false,
    })),
    audit: (claimed) => ({ session_id: sessionId, routes: [...claimed].sort() }),
    seen,
  });
  if (!op?.hint) throw new Error("the route_sync was not started on a guessed head");
  const plan: SyncPlan = {
    session_id: sessionId,
    key_id: null,
    workflow_run_id: "run-1",
    commit_sha: "c".repeat(40),
    ip: "192.0.2.7",
    server_id: serverId,
    server_name: "s1",
    entries: apps.map((id, i) => {
      const v = verdicts.get(id)!;
      if (!("claimed" in v)) throw new Error("not claimed");
      return {
        rank: i + 1,
        application_id: id,
        container_name: `web-${i}`,
        container_port: 8080 + i,
        image_tag: "app:2",
        force: false,
        claim: v.claimed,
      };
    }),
    // An entry refused before the job, first in the request.
    decided: [
      { rank: 0, container_name: "gone", outcome: "error", reason: "not in this session", force: false },
    ],
  };
  const bus = new MemoryBus();
  const ops = new OperationService(db, bus, log, 60_000);
  ops.onSettle("route_sync", syncSettler);
  return { db, tenantId, serverId, sessionId, apps, op, plan, ops, bus };
}

/** The agent's report: the first application synced, the second refused by the proxy. */
function reported(s: Started): FinalResult {
  const route = (id: string, status: RouteOutcomeStatus, error: string) => ({
    applicationId: id,
    status,
    signatureHash: `sha256:${"ab".repeat(32)}`,
    fqdns: [`${id.slice(0, 8)}.example.test`],
    upstream: "127.0.0.1:8080",
    error,
  });
  return {
    status: "completed",
    exit_code: 0,
    stdout: "",
    stderr: "",
    duration_ms: 12,
    detail: {
      $case: "routeSync",
      routeSync: {
        proxy: "caddy",
        upstreamMode: "host",
        routes: [
          route(s.apps[0]!, RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_SYNCED, ""),
          route(s.apps[1]!, RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_FAILED, "port 8081 is not served"),
        ],
        removedApplicationIds: [],
      },
    },
  };
}

async function events(db: Knex, tenantId: string) {
  const rows = await db("audit_events").where({ tenant_id: tenantId }).orderBy("seq");
  return rows.map((r) => ({
    seq: Number(r.seq),
    type: r.event_type as string,
    operation: r.operation_id as string | null,
    payload: JSON.parse(r.payload) as Record<string, unknown>,
  }));
}

const holder = async (db: Knex, app: string) =>
  (await db("application_route_state").where({ application_id: app }).first())?.last_session_id ?? null;

async function complete(s: Started, result: FinalResult, hint: StartedOperation["hint"]) {
  const waiter = await s.bus.awaitDone(s.op.id);
  const stored = await s.ops.complete(s.op.id, result, s.serverId, s.tenantId, hint);
  const done: OperationDone = await waiter.done;
  waiter.cancel();
  return { stored, done };
}

test.serial(
  "settled - the entries' event is chained right after operation.completed, in its commit",
  async (t) => {
    const s = await started(t);
    const { stored, done } = await complete(s, reported(s), { ...s.op.hint!, settle: s.plan });
    t.true(stored);
    t.true(done.settled);
    const all = await events(s.db, s.tenantId);
    const completed = all.find((e) => e.type === "operation.completed" && e.operation === s.op.id)!;
    const sync = all.filter((e) => e.type === "external_deploy.sync");
    t.is(sync.length, 1);
    t.is(sync[0]!.seq, completed.seq + 1, "chained right behind the completion");
    t.is(sync[0]!.operation, s.op.id);
    t.like(sync[0]!.payload, {
      session_id: s.sessionId,
      commit_sha: "c".repeat(40),
      workflow_run_id: "run-1",
      ip: "192.0.2.7",
      server_id: s.serverId,
      operation_id: s.op.id,
    });
    const entries = sync[0]!.payload.entries as Record<string, unknown>[];
    t.deepEqual(
      entries.map((e) => [e.container_name, e.outcome]),
      [
        ["gone", "error"],
        ["web-0", "synced"],
        ["web-1", "error"],
      ],
    );
    t.like(entries[1], { application_id: s.apps[0], container_port: 8080, image_tag: "app:2" });
    t.is(entries[2]!.reason, "the agent refused the route: port 8081 is not served");
    // The refused route's claim is given back; the synced one's holds for the guard.
    t.is(await holder(s.db, s.apps[0]!), s.sessionId);
    t.is(await holder(s.db, s.apps[1]!), null);
    // The done event tells the head the completion left.
    t.deepEqual({ seq: done.chainSeq, head: done.chainHead }, await readHead(s.db, s.tenantId));
    // A second report of the operation finds it finished: nothing is settled twice.
    t.false(
      await s.ops.complete(s.op.id, reported(s), s.serverId, s.tenantId, { ...s.op.hint!, settle: s.plan }),
    );
    t.is((await events(s.db, s.tenantId)).filter((e) => e.type === "external_deploy.sync").length, 1);
    t.true((await verifyTenantChain(s.db, s.tenantId, keys)).ok);
  },
);

test.serial(
  "settled - a failed operation gives every claim back, each entry an error naming why",
  async (t) => {
    const s = await started(t);
    const failed: FinalResult = {
      status: "failed",
      exit_code: -1,
      stdout: "",
      stderr: "caddy admin API refused the load",
      duration_ms: 3,
    };
    const { done } = await complete(s, failed, { ...s.op.hint!, settle: s.plan });
    t.true(done.settled);
    const sync = (await events(s.db, s.tenantId)).find((e) => e.type === "external_deploy.sync")!;
    const entries = sync.payload.entries as Record<string, unknown>[];
    t.deepEqual(
      entries.slice(1).map((e) => e.reason),
      [0, 1].map(() => "route sync on server 's1' failed: caddy admin API refused the load"),
    );
    t.is(await holder(s.db, s.apps[0]!), null);
    t.is(await holder(s.db, s.apps[1]!), null);
  },
);

test.serial(
  "settled - facts that do not match the row: the locking way settles it all the same",
  async (t) => {
    const s = await started(t);
    // A wrong start time: the guarded update moves nothing, the batch is undone and goes the locking way.
    const { done } = await complete(s, reported(s), { ...s.op.hint!, startedAt: 1, settle: s.plan });
    t.true(done.settled);
    const all = await events(s.db, s.tenantId);
    const completed = all.filter((e) => e.type === "operation.completed");
    const sync = all.filter((e) => e.type === "external_deploy.sync");
    t.is(completed.length, 1);
    t.is(sync.length, 1);
    t.is(sync[0]!.seq, completed[0]!.seq + 1);
    t.is(await holder(s.db, s.apps[1]!), null);
    t.true((await verifyTenantChain(s.db, s.tenantId, keys)).ok);
  },
);

test.serial(
  "unsettled - no plan, or one of another server: the completion alone, and the done event says so",
  async (t) => {
    for (const hint of [
      (s: Started) => s.op.hint!,
      (s: Started) => ({ ...s.op.hint!, settle: { ...s.plan, server_id: randomUUID() } }),
      (s: Started) => ({ ...s.op.hint!, settle: { ...s.plan, entries: [{ rank: "x" }] } }),
    ]) {
      const s = await started(t);
      const { stored, done } = await complete(s, reported(s), hint(s));
      t.true(stored);
      t.false(done.settled);
      const all = await events(s.db, s.tenantId);
      t.true(all.some((e) => e.type === "operation.completed" && e.operation === s.op.id));
      t.false(all.some((e) => e.type === "external_deploy.sync"));
      // Both claims still held: the api gives back what its own settlement says.
      t.is(await holder(s.db, s.apps[1]!), s.sessionId);
    }
  },
);
