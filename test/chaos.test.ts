// Chaos across instances: a 3-node NATS cluster, MariaDB, 2 api and 2 gateway processes and
// 20 agents (each given both gateways), with a steady stream of execs from several clients
// over both api processes. While it runs, a gateway is killed with SIGKILL (and started
// again), a NATS node is killed and brought back, and MariaDB is killed and restarted.
// Afterwards every operation is final and tells the truth about what ran, nothing ran twice
// (the agents' journals and the commands' own marker files), the audit trail has one start
// and one completion event per operation and its chain verifies, every agent is connected
// again, and the only 5xx is 503, answered while NATS or MariaDB was down.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import test, { type ExecutionContext } from "ava";
import type { Agent } from "./harness/agent";
import { CHAIN_KEY, eventHash } from "./harness/audit-chain";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { type Cluster, type ServerHandle, startCluster } from "./harness/cluster";
import { type ControlPlane, SHORT_LEASE } from "./harness/control-plane";
import { type ExecCall, startExecStream } from "./harness/exec-stream";
import { exec } from "./harness/http";
import { startOwned } from "./harness/mariadb";
import { clientConnections, startNatsCluster } from "./harness/nats";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

const AGENTS = 20;
const CLIENTS = 6;
const CALLS_PER_SECOND = 4; // per client
/** A 503 counts as "while down" when its call overlaps the outage or ends this soon after it. */
const RECOVERY_GRACE_MS = 3000;
/** How long NATS node and MariaDB stay down: two agent leases (heartbeats cannot renew them). */
const OUTAGE_MS = 2 * Number(SHORT_LEASE.RELAYCTL_LEASE_MS);

interface Window {
  what: string;
  from: number;
  to: number;
}

/** The installation, started in a hook: ava's 3-minute timeout counts setup and run apart. */
async function startInstallation() {
  const began = Date.now();
  const [nats, mariadb] = await Promise.all([startNatsCluster(3), startOwned()]);
  // The short lease: the outages outlast it, which is what the sweeper must not mistake for lost agents.
  const c = await startCluster({ nats, mariadb, gateways: 2, apis: 2, serverEnv: SHORT_LEASE });
  const servers = [{ serverId: c.serverId, agent: c.agent }, ...(await addServers(c, AGENTS - 1))];
  const clients = await Promise.all(
    Array.from({ length: CLIENTS }, async (_, i) => ({
      baseUrl: c.apis[i % c.apis.length]!.apiUrl,
      key: (await c.createKey(["--rate-limit", "1000"])).key,
    })),
  );
  return {
    nats,
    mariadb,
    c,
    agents: servers.map((s) => s.agent!),
    serverIds: servers.map((s) => s.serverId),
    clients,
    setupMs: Date.now() - began,
  };
}

let installation: ReturnType<typeof startInstallation>;

test.before(async (t) => {
  t.timeout(240_000);
  installation = startInstallation();
  await installation;
});

test("chaos - execs stay exactly-once, audited and answered through gateway, NATS and MariaDB failures", async (t) => {
  t.timeout(240_000);
  const { nats, mariadb, c, agents, serverIds, clients, setupMs } = await installation;
  t.teardown(() => c.stop());
  const ranDir = makeTempDir("chaos-ran");
  // Every fifth command runs for a second, so some are in flight at each failure.
  const command = (token: string, server: number, n: number) =>
    `echo ${token} >> ${join(ranDir, String(server))}; ${n % 5 === 0 ? "sleep 1; " : ""}echo ${token}`;

  const stream = startExecStream({
    clients,
    serverIds,
    perSecond: CALLS_PER_SECOND,
    command,
    timeoutSeconds: 5,
  });
  const ok = (call: ExecCall) => call.status === 200;
  await stream.answered(30, 30_000, ok);

  const failover = await killAGateway(t, c, agents);
  await stream.answered(30, 30_000, ok);

  const windows: Window[] = [];
  // The node holding most of the control plane's connections (each process picks one at random).
  const node = [...nats.nodes].sort((a, b) => clientConnections(b) - clientConnections(a))[0]!;
  const natsClients = clientConnections(node);
  const natsDown = Date.now();
  await node.stop("SIGKILL");
  // Down long enough for every client to have reconnected to another node.
  await stream.answered(1, 30_000, (call) => call.sentAt > natsDown + OUTAGE_MS);
  await node.restart();
  windows.push({ what: `NATS node (${natsClients} clients) down`, from: natsDown, to: Date.now() });
  await stream.answered(30, 30_000, ok);

  const dbDown = Date.now();
  await mariadb.stop("SIGKILL");
  // Down past the agents' leases, with commands running all the while.
  await stream.answered(1, 30_000, (call) => call.sentAt > dbDown + OUTAGE_MS);
  await mariadb.start();
  windows.push({ what: "MariaDB down", from: dbDown, to: Date.now() });
  await stream.answered(30, 60_000, ok);
  await stream.stop();

  const calls = stream.calls;
  await everyOperationFinal(c);
  const rows = await c.db.query<{ id: string; status: string; exit_code: number; stdout: string | null }>(
    "SELECT id, status, exit_code, stdout FROM operations WHERE tenant_id = ? AND operation_type = 'exec'",
    [c.tenantId],
  );
  const tokens = await tokensByOperation(c);
  const ran = ranCounts(ranDir, AGENTS);

  // The figures first, so a failing run shows them too.
  t.log(`setup (NATS cluster, MariaDB, 2 api, 2 gateways, ${AGENTS} agents): ${setupMs} ms`);
  t.log(
    `calls: ${calls.length} from ${CLIENTS} clients; by status: ${JSON.stringify(countBy(calls.map((x) => String(x.status))))}`,
  );
  t.log(
    `operations stored: ${rows.length}, by final status: ${JSON.stringify(countBy(rows.map((r) => r.status)))}`,
  );
  t.log(`commands run (marker lines): ${[...ran.values()].reduce((a, b) => a + b, 0)}`);
  const in409 = (from: number, to: number) =>
    calls.filter((x) => x.status === 409 && x.answeredAt >= from && x.answeredAt < to).length;
  t.log(
    `gateway failover: ${failover.moved} agents moved; to the other gateway in ` +
      `min ${Math.min(...failover.ms)} / median ${median(failover.ms)} / max ${Math.max(...failover.ms)} ms; ` +
      `409 (not connected) answers from the kill to the NATS kill: ${in409(failover.killedAt, windows[0]!.from)}, ` +
      `after: ${in409(windows[0]!.from, Number.POSITIVE_INFINITY)}`,
  );
  // Each 503 is put down to the latest outage that began before it was answered.
  const outageOf = (call: ExecCall) => windows.filter((w) => w.from <= call.answeredAt).at(-1);
  for (const w of windows) {
    const in503 = calls.filter((x) => x.status === 503 && outageOf(x) === w);
    const last = in503.length ? Math.max(...in503.map((x) => x.answeredAt - w.to)) : "-";
    const details = JSON.stringify(countBy(in503.map((x) => x.detail ?? "")));
    t.log(`${w.what}: ${w.to - w.from} ms; 503s: ${details}; the last answered ${last} ms after it was back`);
  }

  checkExactlyOnce(t, agents, ran);
  checkTruthfulStates(t, calls, rows, tokens, ran);
  await checkAudit(
    t,
    c,
    rows.map((r) => r.id),
  );
  await checkEveryAgentBack(t, c, agents, serverIds);
  checkStatuses(t, calls, windows);
});

/** The call was in flight while the window lasted, or ended within the recovery grace after it. */
function overlaps(call: ExecCall, w: Window): boolean {
  return call.sentAt <= w.to + RECOVERY_GRACE_MS && call.answeredAt >= w.from;
}

/** Enrolls (admin CLI join token + `relayctl-agent enroll`) and starts n more servers' agents, 5 at a time. */
async function addServers(c: Cluster, n: number): Promise<ServerHandle[]> {
  const servers: ServerHandle[] = [];
  for (let i = 0; i < n; i += 5) {
    const batch = Array.from({ length: Math.min(5, n - i) }, () => c.addServer({ start: true }));
    servers.push(...(await Promise.all(batch)));
  }
  return servers;
}

/** The gateway URL of an agent's latest "connected" line. */
function gatewayOf(agent: Agent): string | undefined {
  const connected = agent.proc.lines.filter((l) => l.json?.msg === "connected");
  return connected.at(-1)?.json?.gateway as string | undefined;
}

/**
 * SIGKILLs the gateway holding more agents; each of them must be on the other gateway while
 * the killed one is still down (it is started again only once all have moved). How long each
 * took (its backoff, 50–500 ms here, plus a handshake) is a figure in the log, not a bound a
 * busy machine could break.
 */
async function killAGateway(t: ExecutionContext, c: Cluster, agents: Agent[]) {
  const held = c.gateways.map((g) => agents.filter((a) => gatewayOf(a) === g.gatewayUrl));
  t.true(
    held.every((h) => h.length > 0),
    `agents spread over both gateways (${held.map((h) => h.length).join(" / ")})`,
  );
  const victimIndex = held[0]!.length >= held[1]!.length ? 0 : 1;
  const victim: ControlPlane = c.gateways[victimIndex]!;
  const survivor = c.gateways[1 - victimIndex]!;
  const moving = held[victimIndex]!;
  const marks = moving.map((a) => a.proc.mark());
  const killedAt = Date.now();
  await victim.stop("SIGKILL");
  const ms = await Promise.all(
    moving.map(async (a, i) => {
      const line = await a.proc.waitForMsg("connected", { from: marks[i]!, timeoutMs: 30_000 });
      t.is(line.gateway, survivor.gatewayUrl, "moved to the surviving gateway");
      return Number(line.time) - killedAt;
    }),
  );
  await victim.start();
  return { moved: moving.length, ms, killedAt };
}

/** Polls until no operation of the tenant is running (the sweeper may have to end some). */
async function everyOperationFinal(c: Cluster): Promise<void> {
  await pollUntil(
    async () => {
      const [row] = await c.db.query<{ n: number }>(
        "SELECT COUNT(*) AS n FROM operations WHERE tenant_id = ? AND status = 'running'",
        [c.tenantId],
      );
      return Number(row!.n) === 0 ? true : undefined;
    },
    { what: "every operation to reach a final state", timeoutMs: 60_000, intervalMs: 250 },
  );
}

/** The token of every stored exec, from the command its `operation.exec` audit event recorded. */
async function tokensByOperation(c: Cluster): Promise<Map<string, string>> {
  const events = await c.db.query<{ operation_id: string; payload: string }>(
    "SELECT operation_id, payload FROM audit_events WHERE tenant_id = ? AND event_type = 'operation.exec'",
    [c.tenantId],
  );
  const tokens = new Map<string, string>();
  for (const e of events) {
    const cmd = String(JSON.parse(e.payload).command);
    tokens.set(e.operation_id, /^echo (\S+) >>/.exec(cmd)![1]!);
  }
  return tokens;
}

/** How many times each token's command wrote its marker line. */
function ranCounts(dir: string, servers: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i < servers; i++) {
    let text = "";
    try {
      text = readFileSync(join(dir, String(i)), "utf8");
    } catch {
      continue; // no command reached this server
    }
    for (const token of text.split("\n").filter(Boolean)) counts.set(token, (counts.get(token) ?? 0) + 1);
  }
  return counts;
}

/** No operation ran twice: neither in any agent's journal nor by the commands' own marker lines. */
function checkExactlyOnce(t: ExecutionContext, agents: Agent[], ran: Map<string, number>): void {
  for (const agent of agents) {
    const journal = readFileSync(join(agent.stateDir, "journal.log"), "utf8");
    const starts = journal.split("\n").filter((l) => l.startsWith("start "));
    const twice = Object.entries(countBy(starts)).filter(([, n]) => n > 1);
    t.deepEqual(twice, [], `journal of ${agent.stateDir} starts no operation twice`);
  }
  const twice = [...ran].filter(([, n]) => n > 1);
  t.deepEqual(twice, [], "no command wrote its marker twice");
}

/**
 * Final states tell what happened: a completed exec ran (its output is its token), an exec
 * that is failed or timed out did not run to its end, and every call answered 200 has the
 * stored operation's output.
 */
function checkTruthfulStates(
  t: ExecutionContext,
  calls: ExecCall[],
  rows: { id: string; status: string; exit_code: number; stdout: string | null }[],
  tokens: Map<string, string>,
  ran: Map<string, number>,
): void {
  const lies: string[] = [];
  for (const row of rows) {
    const token = tokens.get(row.id);
    if (!token) {
      lies.push(`${row.id}: no operation.exec audit event`);
      continue;
    }
    const didRun = ran.has(token);
    if (row.status === "completed" && (row.stdout !== `${token}\n` || !didRun))
      lies.push(`${row.id} completed with stdout ${JSON.stringify(row.stdout)}, ran: ${didRun}`);
    if (row.status !== "completed" && didRun && row.exit_code === -1)
      lies.push(`${row.id} recorded ${row.status} (exit -1) but its command ran`);
  }
  t.deepEqual(lies, [], "every stored final state matches what ran");
  const byId = new Map(rows.map((r) => [r.id, r]));
  for (const call of calls.filter((x) => x.operationId)) {
    const row = byId.get(call.operationId!);
    t.truthy(row, `the operation of call ${call.token} is stored`);
    if (call.status !== 200) continue;
    // 200 is any final state (one the sweeper reached first, too): the one stored.
    t.is(call.operationStatus, row?.status, `call ${call.token} was told the stored final state`);
    if (call.operationStatus === "completed")
      t.is(call.stdout, `${call.token}\n`, `call ${call.token} got its own output`);
  }
}

/** Exactly one operation.exec and one operation.completed per operation, and the chain verifies. */
async function checkAudit(t: ExecutionContext, c: Cluster, ids: string[]): Promise<void> {
  const events = await c.db.query("SELECT * FROM audit_events WHERE tenant_id = ? ORDER BY seq", [
    c.tenantId,
  ]);
  const per = new Map<string, string[]>();
  for (const e of events) {
    if (!e.operation_id) continue;
    const list = per.get(String(e.operation_id)) ?? [];
    list.push(String(e.event_type));
    per.set(String(e.operation_id), list);
  }
  const wrong = ids
    .map((id) => [id, (per.get(id) ?? []).sort()] as const)
    .filter(([, types]) => types.join() !== "operation.completed,operation.exec");
  t.deepEqual(wrong, [], "each operation has one operation.exec and one operation.completed event");
  t.is(per.size, ids.length, "no events of operations that were not stored");
  let prev: string | null = null;
  const broken: number[] = [];
  for (const [i, row] of events.entries()) {
    if (Number(row.seq) !== i + 1 || row.prev_hash !== prev || row.hash !== eventHash(row, prev, CHAIN_KEY))
      broken.push(Number(row.seq));
    prev = String(row.hash);
  }
  t.deepEqual(broken, [], "the chain links and every HMAC verify");
  const verify = await c.admin(["audit", "verify", "--tenant", c.tenantId]);
  t.true(verify.ok, `admin audit verify: ${JSON.stringify(verify).slice(0, 500)}`);
}

/** Every agent process is the one started at first, and each server runs a command again. */
async function checkEveryAgentBack(
  t: ExecutionContext,
  c: Cluster,
  agents: Agent[],
  serverIds: string[],
): Promise<void> {
  t.true(
    agents.every((a) => a.generations.length === 1 && a.proc.running),
    "no agent was restarted",
  );
  await Promise.all(
    serverIds.map((server_id) =>
      pollUntil(
        async () => {
          const res = await exec(c, { server_id, command: "echo back", timeout_seconds: 10 });
          return res.status === 200 && res.json.stdout === "back\n" ? true : undefined;
        },
        { what: `server ${server_id} to run a command again`, timeoutMs: 30_000, intervalMs: 250 },
      ),
    ),
  );
  t.pass("every server ran a command after the chaos");
}

/** No 5xx but 503, and each 503 answered while NATS or MariaDB was down. */
function checkStatuses(t: ExecutionContext, calls: ExecCall[], windows: Window[]): void {
  const during = (call: ExecCall) => windows.some((w) => overlaps(call, w));
  const bad = calls.filter((x) => x.status === 0 || (x.status >= 500 && x.status !== 503));
  t.deepEqual(bad, [], "no call failed without an answer or with a 5xx other than 503");
  const stray = calls.filter((x) => x.status === 503 && !during(x));
  t.deepEqual(stray, [], "every 503 came while NATS or MariaDB was down");
  const unexpected = calls.filter((x) => ![200, 202, 409, 503].includes(x.status));
  t.deepEqual(unexpected, [], "every answer is 200, 202, 409 (not connected) or 503");
}

function countBy(values: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}
