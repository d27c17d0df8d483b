// A caller that waits for its operation hears only a refusal (JobBus.send), and a refusal is
// asked again before it counts: while an agent moves to another gateway, the gateway it left may
// still hold the server's subject and refuse the job the new gateway put on the stream. Real
// nats-server, two gateway connections, the operations service on a real (SQLite) store.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { queryObjects, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import test from "ava";
import pino from "pino";
import { resolveAuditKeys, useAuditKeys } from "../control-plane/src/audit/chain-key";
import { enrollAgent } from "../control-plane/src/auth/agent-credentials";
import type { JobBus, JobKind } from "../control-plane/src/bus/job-bus";
import { connectNatsBus } from "../control-plane/src/bus/nats-bus";
import { createJoinToken, createTenant } from "../control-plane/src/cli/admin";
import { type Db, migrate, openDb } from "../control-plane/src/db/knex";
import { OperationService } from "../control-plane/src/operations/service";
import { cleanupAll } from "./harness/cleanup";
import { sharedNats } from "./harness/nats";
import { pollUntil } from "./harness/wait";

const log = pino({ level: "silent" });

let db: Db;
let dir: string;
let tenantId: string;
let server: { id: string; name: string };
const buses: JobBus[] = [];

test.before(async () => {
  dir = mkdtempSync(join(tmpdir(), "relayctl-refusal-"));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  db = openDb(url);
  await migrate(db);
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  tenantId = (await createTenant(db, "refusals")).tenant_id;
  const { join_token } = await createJoinToken(db, { tenant: tenantId, serverName: "web-1", ttlMinutes: 5 });
  const enrolled = await enrollAgent(db, { token: join_token, ip: "127.0.0.1" });
  server = { id: enrolled.server_id, name: enrolled.server_name };
});

test.after.always(async () => {
  for (const b of buses) await b.close();
  await db?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
  await cleanupAll();
});

async function bus(name: string): Promise<JobBus> {
  const b = await connectNatsBus([(await sharedNats()).url], log, name);
  buses.push(b);
  return b;
}

const job = (): JobKind => ({
  $case: "exec",
  exec: { command: "true", workingDirectory: "", env: {}, deadlineSeconds: 60, streamOutput: false },
});

/** An exec operation on the enrolled server, recorded with its audit event. */
const startExec = (ops: OperationService) =>
  ops.start({
    tenantId,
    server,
    operationType: "exec",
    keyId: null,
    runId: null,
    deadlineSeconds: 60,
    audit: {},
  });

async function status(id: string): Promise<string> {
  const row = await db("operations").where({ id }).first<{ status: string }>("status");
  return String(row?.status);
}

test.serial("a stale gateway's refusal does not end a job another gateway put on the stream", async (t) => {
  const api = await bus("refusal-api");
  const stale = await bus("refusal-stale-gateway");
  const holder = await bus("refusal-holder-gateway");
  const ops = new OperationService(db, api, log, 60_000);
  const delivered: string[] = [];
  // The gateway the agent left: still subscribed, its stream gone.
  t.teardown(stale.serveServer(server.id, async () => false));
  // The gateway holding the agent's new stream: the job goes on it, and the agent's result comes back.
  t.teardown(
    holder.serveServer(server.id, async (j) => {
      delivered.push(j.operationId);
      // Answers after the stale one, every time: a first-answer-wins request would say "not connected".
      await new Promise((resolve) => setTimeout(resolve, 30));
      setTimeout(() => {
        void ops.complete(
          j.operationId,
          { status: "completed", exit_code: 0, stdout: "ran\n", stderr: "", duration_ms: 1 },
          server.id,
          tenantId,
        );
      }, 50);
      return true;
    }),
  );
  // Both subscriptions are on the server once a request is answered on_stream and refused alike.
  await pollUntil(
    async () => {
      const probe = await startExec(ops);
      const outcome = await ops.run(probe, job(), 5000);
      return delivered.includes(probe.id) && outcome.state === "finished" ? true : undefined;
    },
    { what: "both gateways subscribed", timeoutMs: 10_000 },
  );

  const op = await startExec(ops);
  const outcome = await ops.run(op, job(), 10_000);
  t.like(outcome, { state: "finished", status: "completed", result: { stdout: "ran\n" } });
  t.is(await status(op.id), "completed");
  // Delivered twice (the send, then the request that asked again): one result, stored once.
  t.is(delivered.filter((id) => id === op.id).length, 2);
});

test.serial(
  "a refusal with no other gateway holding the agent is not connected, recorded failed",
  async (t) => {
    const api = await bus("refusal-api-2");
    const stale = await bus("refusal-stale-2");
    const ops = new OperationService(db, api, log, 60_000);
    let refusedJobs = 0;
    t.teardown(
      stale.serveServer(server.id, async () => {
        refusedJobs++;
        return false;
      }),
    );
    await pollUntil(
      async () => {
        const probe = await startExec(ops);
        await ops.run(probe, job(), 2000);
        return refusedJobs > 0 ? true : undefined;
      },
      { what: "the stale gateway subscribed", timeoutMs: 10_000 },
    );
    const op = await startExec(ops);
    const outcome = await ops.run(op, job(), 10_000);
    t.like(outcome, { state: "not_run", cause: "not_connected", reason: "server 'web-1' is not connected" });
    t.is(await status(op.id), "failed");
  },
);

test.serial(
  "a wait that heard a refusal and then its completion keeps nothing of it once answered",
  async (t) => {
    const api = await bus("refusal-api-3");
    const stale = await bus("refusal-stale-3");
    const holder = await bus("refusal-holder-3");
    const ops = new OperationService(db, api, log, 60_000);
    const delivered = new Set<string>();
    t.teardown(stale.serveServer(server.id, async () => false));
    t.teardown(
      holder.serveServer(server.id, async (j) => {
        // Completed once, on the second delivery (the request that asked again after the refusal).
        if (delivered.has(j.operationId)) {
          void ops.complete(
            j.operationId,
            { status: "completed", exit_code: 0, stdout: "ran\n", stderr: "", duration_ms: 1 },
            server.id,
            tenantId,
          );
        }
        delivered.add(j.operationId);
        await new Promise((resolve) => setTimeout(resolve, 30));
        return true;
      }),
    );
    await pollUntil(
      async () => {
        const probe = await startExec(ops);
        const outcome = await ops.run(probe, job(), 5000);
        return outcome.state === "finished" ? true : undefined;
      },
      { what: "both gateways subscribed", timeoutMs: 10_000 },
    );
    // A wait's race against a promise that never settles (a module-wide one) would keep each
    // race's outcome, its result included, for the life of the process: count what is left.
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const livePromises = () => {
      gc();
      return queryObjects(Promise, { format: "count" }) as number;
    };
    const runs = 40;
    const before = livePromises();
    for (let i = 0; i < runs; i++) {
      const op = await startExec(ops);
      const outcome = await ops.run(op, job(), 10_000);
      t.like(outcome, { state: "finished", status: "completed" });
    }
    const after = livePromises();
    t.true(
      after - before < runs / 2,
      `${after - before} promises more after ${runs} refused-then-completed waits`,
    );
  },
);
