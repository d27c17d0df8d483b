// The floor of an exec (issue 17): the same hops relayctl makes, with the costs its guarantees
// cannot avoid and nothing else, built from the same parts (node:http, mysql2, nats, grpc-js,
// node-pty) so the benches can say how close relayctl is to it, in the same run:
//
//   client → HTTP POST → front: one round trip to MariaDB that counts the request in its key's
//   window (exact across instances) and commits the operation row with its hash-chained audit
//   event (nothing runs unaudited) → NATS publish whose reply subject hears only a refusal (no
//   responders: not connected) → gateway: the job on the agent's gRPC stream → agent: a durable claim (append + fdatasync; `pty` mode only) and the
//   command spawned in a pty, its result on the stream → gateway: one round trip that commits the
//   result with its chained completion event (durable before it is announced) → NATS publish →
//   front → HTTP 200.
//
// What it leaves out, which relayctl does: authentication against stored key hashes, scopes and
// IP allowlists, body validation and limits, idempotency of reports (only a running operation is
// finished, exactly one completion event), leases, acks and redelivery, result spooling, tracing,
// metrics and logs. Concurrent audited writes of a process are group committed, as relayctl does,
// and the chain's hashes are computed by MariaDB (SHA2 over the previous head and the event) so a
// batch is one round trip.
//
// Run as a library (startFloor) by the benches; each role is this file run as a child process:
//   node floor-chain.mjs front|gateway|agent '<json options>'
import { createHash, randomUUID } from "node:crypto";
import { openSync, writeSync, fdatasync } from "node:fs";
import http from "node:http";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import mysql from "mysql2/promise";
import { connect, StringCodec } from "nats";
import { freePort } from "./processes.mjs";

const SELF = fileURLToPath(import.meta.url);
const TENANT = "00000000-0000-4000-8000-000000000001";
const KEY = "00000000-0000-4000-8000-000000000002";
const MAX_BATCH = 200;
const sc = StringCodec();

const raw = (b) => b;
const SERVICE = {
  connect: {
    path: "/floor.Floor/Connect",
    requestStream: true,
    responseStream: true,
    requestSerialize: raw,
    requestDeserialize: raw,
    responseSerialize: raw,
    responseDeserialize: raw,
  },
};
const encode = (m) => Buffer.from(JSON.stringify(m));
const decode = (b) => JSON.parse(b.toString());

/** Creates the floor's tables in the database `database` (made anew) of the MariaDB at `mysqlUrl` (root). */
async function createSchema(mysqlUrl, database) {
  const c = await mysql.createConnection({ uri: mysqlUrl, multipleStatements: true });
  await c.query(`DROP DATABASE IF EXISTS ${database}; CREATE DATABASE ${database}; USE ${database};
    CREATE TABLE ops (id CHAR(36) PRIMARY KEY, server_id CHAR(36) NOT NULL, status VARCHAR(16) NOT NULL,
      command TEXT NOT NULL, exit_code INT NULL, stdout MEDIUMTEXT NULL, started_at BIGINT NOT NULL,
      completed_at BIGINT NULL, INDEX (server_id, status)) ENGINE=InnoDB;
    CREATE TABLE events (tenant_id CHAR(36) NOT NULL, seq BIGINT NOT NULL, hash CHAR(64) NOT NULL,
      operation_id CHAR(36) NOT NULL, payload TEXT NOT NULL, PRIMARY KEY (tenant_id, seq),
      INDEX (operation_id)) ENGINE=InnoDB;
    CREATE TABLE heads (tenant_id CHAR(36) PRIMARY KEY, head CHAR(64) NOT NULL, seq BIGINT NOT NULL) ENGINE=InnoDB;
    CREATE TABLE counters (key_id CHAR(36) NOT NULL, window_start BIGINT NOT NULL, count BIGINT NOT NULL,
      PRIMARY KEY (key_id, window_start)) ENGINE=InnoDB;
    INSERT INTO heads VALUES ('${TENANT}', REPEAT('0', 64), 0);`);
  await c.end();
}

async function openDb(mysqlUrl, database) {
  const conn = await mysql.createConnection({ uri: mysqlUrl, multipleStatements: true });
  await conn.query(`USE ${database}`);
  return conn;
}

/**
 * Audited writes of one process, group committed: while one batch is in flight the next ones
 * queue, then go together in ONE multi-statement round trip (lock the chain head, the batch's
 * rows, its events chained by MariaDB, the head's move, COMMIT). `build(items)` gives the SQL of
 * the rows and each item's event payload; it resolves once committed.
 */
class Committer {
  constructor(conn, build) {
    this.conn = conn;
    this.build = build;
    this.queue = [];
    this.busy = false;
  }

  submit(item) {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.busy) void this.#drain();
    });
  }

  async #drain() {
    this.busy = true;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, MAX_BATCH);
      const items = batch.map((b) => b.item);
      const { sql, params, payloads, results } = this.build(items);
      const events = payloads.map(() => "(?, @s := @s + 1, @h := SHA2(CONCAT(@h, ?), 256), ?, ?)");
      const eventParams = payloads.flatMap((p, i) => [TENANT, p, items[i].id, p]);
      try {
        const [rows] = await this.conn.query(
          [
            "START TRANSACTION",
            ...sql,
            "SELECT head, seq INTO @h, @s FROM heads WHERE tenant_id = ? FOR UPDATE",
            `INSERT INTO events (tenant_id, seq, hash, operation_id, payload) VALUES ${events.join(", ")}`,
            "UPDATE heads SET head = @h, seq = @s WHERE tenant_id = ?",
            "COMMIT",
          ].join(";\n"),
          [...params, TENANT, ...eventParams, TENANT],
        );
        const out = results ? results(rows) : items.map(() => undefined);
        batch.forEach((b, i) => b.resolve(out[i]));
      } catch (err) {
        await this.conn.query("ROLLBACK").catch(() => {});
        for (const b of batch) b.reject(err);
      }
    }
    this.busy = false;
  }
}

// --- front: the api's part ----------------------------------------------------------------------

async function front({ mysqlUrl, database, natsUrl, token }) {
  const tokenHash = createHash("sha256").update(token).digest("hex");
  const conn = await openDb(mysqlUrl, database);
  const nc = await connect({ servers: natsUrl, noAsyncTraces: true });
  const waiters = new Map();
  nc.subscribe("floor.done.*", {
    callback: (err, msg) => {
      if (err) return;
      const done = JSON.parse(sc.decode(msg.data));
      waiters.get(done.id)?.(done);
    },
  });
  // Refusals only (as relayctl's JobBus.send): NATS's no-responders status when no gateway holds
  // the agent arrives here; a job on a stream is answered by its completion alone.
  const refused = new Map();
  const refusals = `floor.refused.${randomUUID()}`;
  nc.subscribe(`${refusals}.*`, {
    callback: (err, msg) => {
      if (!err) refused.get(msg.subject.slice(refusals.length + 1))?.();
    },
  });
  await nc.flush();
  // The request counted in its key's window and the operation with its event: one round trip.
  const starts = new Committer(conn, (items) => {
    const windowStart = Math.floor(Date.now() / 60_000) * 60_000;
    return {
      sql: [
        "INSERT INTO counters VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE count = count + ?",
        "SELECT count FROM counters WHERE key_id = ? AND window_start = ?",
        `INSERT INTO ops (id, server_id, status, command, started_at) VALUES ${items.map(() => "(?, ?, 'running', ?, ?)").join(", ")}`,
      ],
      params: [
        KEY,
        windowStart,
        items.length,
        items.length,
        KEY,
        windowStart,
        ...items.flatMap((i) => [i.id, i.serverId, i.command, i.startedAt]),
      ],
      payloads: items.map((i) =>
        JSON.stringify({
          type: "operation.exec",
          operation_id: i.id,
          server_id: i.serverId,
          command: i.command,
        }),
      ),
      results: (rows) => {
        const total = Number(rows[2][0].count);
        return items.map((_, i) => total - items.length + 1 + i);
      },
    };
  });
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      const answer = (status, body) => {
        const text = JSON.stringify(body);
        res.writeHead(status, {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(text),
        });
        res.end(text);
      };
      try {
        const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? "";
        if (createHash("sha256").update(bearer).digest("hex") !== tokenHash)
          return answer(401, { detail: "bad key" });
        const body = JSON.parse(Buffer.concat(chunks).toString());
        const op = {
          id: randomUUID(),
          serverId: body.server_id,
          command: body.command,
          startedAt: Date.now(),
        };
        await starts.submit(op);
        const done = new Promise((resolve) => {
          waiters.set(op.id, resolve);
          refused.set(op.id, () => resolve(null));
        });
        nc.publish(`floor.job.${op.serverId}`, sc.encode(JSON.stringify(op)), {
          reply: `${refusals}.${op.id}`,
        });
        const r = await done;
        waiters.delete(op.id);
        refused.delete(op.id);
        if (!r) return answer(409, { detail: "not connected" });
        answer(200, { operation_id: op.id, status: "completed", ...r.result });
      } catch (err) {
        answer(500, { detail: String(err) });
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  console.log(JSON.stringify({ msg: "ready", url: `http://127.0.0.1:${port}` }));
}

// --- gateway ------------------------------------------------------------------------------------

async function gateway({ mysqlUrl, database, natsUrl }) {
  const conn = await openDb(mysqlUrl, database);
  const nc = await connect({ servers: natsUrl, noAsyncTraces: true });
  // One UPDATE for the batch, each row its own result (as relayctl's updateRows).
  const finishes = new Committer(conn, (items) => ({
    sql: [
      `UPDATE ops SET status = 'completed', exit_code = CASE id ${items.map(() => "WHEN ? THEN ?").join(" ")} END, stdout = CASE id ${items.map(() => "WHEN ? THEN ?").join(" ")} END, completed_at = ? WHERE id IN (${items.map(() => "?").join(", ")})`,
    ],
    params: [
      ...items.flatMap((i) => [i.id, i.result.exit_code]),
      ...items.flatMap((i) => [i.id, i.result.stdout]),
      Date.now(),
      ...items.map((i) => i.id),
    ],
    payloads: items.map((i) =>
      JSON.stringify({
        type: "operation.completed",
        operation_id: i.id,
        exit_code: i.result.exit_code,
        result_hash: createHash("sha256").update(i.result.stdout).digest("hex"),
      }),
    ),
  }));
  const server = new grpc.Server();
  server.addService(SERVICE, {
    connect: (call) => {
      const subs = [];
      call.on("data", async (b) => {
        const m = decode(b);
        if (m.hello) {
          for (const serverId of m.hello) {
            subs.push(
              nc.subscribe(`floor.job.${serverId}`, {
                callback: (err, msg) => {
                  if (err) return;
                  call.write(encode({ job: JSON.parse(sc.decode(msg.data)) }));
                  // On the stream: the sender waits for the completion, so no answer (a refusal would be one).
                },
              }),
            );
          }
          await nc.flush();
          call.write(encode({ welcome: true }));
        } else if (m.result) {
          await finishes.submit(m.result);
          nc.publish(`floor.done.${m.result.id}`, sc.encode(JSON.stringify(m.result)));
        }
      });
      call.on("end", () => {
        for (const s of subs) s.unsubscribe();
        call.end();
      });
      call.on("error", () => {});
    },
  });
  const port = await freePort();
  await new Promise((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    ),
  );
  console.log(JSON.stringify({ msg: "ready", address: `127.0.0.1:${port}` }));
}

// --- agent --------------------------------------------------------------------------------------

async function agent({ address, serverIds, mode, journal: journalFile }) {
  const pty = mode === "pty" ? (await import("@lydell/node-pty")).default : null;
  const journal = mode === "pty" ? openSync(journalFile, "a") : null;
  // Claims group committed as the real agent's journal: one append and one fdatasync per batch.
  let pending = [];
  let busy = false;
  const flush = () => {
    const batch = pending;
    pending = [];
    try {
      writeSync(journal, batch.map((b) => `start ${b.id}\n`).join(""));
    } catch (err) {
      for (const b of batch) b.reject(err);
      busy = false;
      return;
    }
    fdatasync(journal, (err) => {
      for (const b of batch) err ? b.reject(err) : b.resolve();
      if (pending.length > 0) flush();
      else busy = false;
    });
  };
  const claim = (id) =>
    new Promise((resolve, reject) => {
      pending.push({ id, resolve, reject });
      if (busy) return;
      busy = true;
      queueMicrotask(flush);
    });
  const run = (command) =>
    new Promise((resolve) => {
      const t0 = performance.now();
      // The command itself in a pty, as the bench's bare pty row spawns it (no shell).
      const term = pty.spawn(command, [], {
        name: "xterm-256color",
        cols: 80,
        rows: 24,
        cwd: os.tmpdir(),
        env: process.env,
      });
      let out = "";
      term.onData((d) => {
        out += d;
      });
      term.onExit(({ exitCode }) =>
        resolve({
          exit_code: exitCode,
          stdout: out,
          stderr: "",
          duration_ms: Math.round(performance.now() - t0),
        }),
      );
    });
  // One stream per agent, each on its own connection (as separate agent processes have).
  for (const serverId of serverIds) {
    const Client = grpc.makeGenericClientConstructor(SERVICE, "Floor");
    const client = new Client(address, grpc.credentials.createInsecure(), {
      "grpc.use_local_subchannel_pool": 1,
    });
    const call = client.connect();
    await new Promise((resolve, reject) => {
      call.on("data", async (b) => {
        const m = decode(b);
        if (m.welcome) return resolve();
        if (!m.job) return;
        const { id, command } = m.job;
        if (mode === "pty") {
          await claim(id);
          call.write(encode({ ack: id }));
          call.write(encode({ result: { id, result: await run(command) } }));
        } else {
          call.write(encode({ ack: id }));
          call.write(
            encode({ result: { id, result: { exit_code: 0, stdout: "", stderr: "", duration_ms: 0 } } }),
          );
        }
      });
      call.on("error", reject);
      call.write(encode({ hello: [serverId] }));
    });
  }
  console.log(JSON.stringify({ msg: "ready" }));
}

// --- library --------------------------------------------------------------------------------------

/**
 * Starts the floor's front, gateway and agent in `group` (a ProcessGroup), with `agents` server
 * ids on one agent process: `mode` `pty` (claim + command in a pty) or `sim` (answered at once).
 * Returns the front's URL, the servers' ids, the bearer token and the pids (for CPU figures).
 */
export async function startFloor(group, dir, { mysqlUrl, natsUrl, mode, agents = 1, name = "floor" }) {
  const database = name.replace(/[^a-z0-9]/gi, "_");
  await createSchema(mysqlUrl, database);
  const token = `floor_${randomUUID()}`;
  const serverIds = Array.from({ length: agents }, () => randomUUID());
  const start = async (role, opts) => {
    // BENCH_CPU_PROF=<dir>: profiles of the floor's processes beside relayctl's (relayctl-stack.mjs).
    const prof = process.env.BENCH_CPU_PROF
      ? [
          "--cpu-prof",
          `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`,
          `--cpu-prof-name=${name}-${role}.cpuprofile`,
        ]
      : [];
    const proc = group.start(`${name}-${role}`, process.execPath, [
      ...prof,
      SELF,
      role,
      JSON.stringify(opts),
    ]);
    return { proc, ready: await proc.waitForMsg("ready", { timeoutMs: 60_000 }) };
  };
  const gw = await start("gateway", { mysqlUrl, database, natsUrl });
  const fr = await start("front", { mysqlUrl, database, natsUrl, token });
  const ag = await start("agent", {
    address: gw.ready.address,
    serverIds,
    mode,
    journal: join(dir, `${name}-journal`),
  });
  return {
    url: fr.ready.url,
    token,
    serverIds,
    database,
    pids: { front: fr.proc.pid, gateway: gw.proc.pid, agent: ag.proc.pid },
  };
}

if (process.argv[1] === SELF) {
  const roles = { front, gateway, agent };
  const [name, opts] = process.argv.slice(2);
  // Ends on the bench's SIGTERM by exiting, so --cpu-prof (BENCH_CPU_PROF) writes its profile.
  process.once("SIGTERM", () => process.exit(0));
  roles[name](JSON.parse(opts)).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
