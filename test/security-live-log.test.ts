// Issue 30, finding 3: deployment live logs (GET .../deployments/{id}/log) are
// bounded per credential and per tenant (429 with a detail beyond), and pushed:
// a stream reads the database when a write is announced on the bus (a queue
// line, the operation's end), not on a timer. Deployments here wait in the queue
// on a server whose agent is not connected, which is how one streams for long;
// nothing needs an engine.
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ApiResponse, request } from "./harness/http";
import { pollUntil } from "./harness/wait";

const PER_KEY = 2;
const PER_TENANT = 3;

let c: Cluster;
let keys: string[];
let serverId: string;
let repoPath: string;

test.before(async () => {
  c = await startCluster({
    serverEnv: {
      RELAYCTL_LIVE_LOG_STREAMS_PER_KEY: String(PER_KEY),
      RELAYCTL_LIVE_LOG_STREAMS_PER_TENANT: String(PER_TENANT),
    },
  });
  keys = [];
  for (let i = 0; i < 2; i++) {
    const out = await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", `live-${i}-${uniq()}`]);
    keys.push(String(out.key));
  }
  serverId = (await c.addServer({ start: false })).serverId;
  // Never fetched (the agent is away): an empty repository is enough for the application.
  repoPath = mkdtempSync(join(tmpdir(), "live-log-repo-"));
  execFileSync("git", ["init", "-q", repoPath]);
});
test.after.always(cleanupAll);

function uniq(): string {
  return Math.random().toString(36).slice(2, 8);
}

const manage = (path: string, body?: unknown, key = keys[0]!): Promise<ApiResponse> =>
  request(c, `/api${path}`, { key: null, headers: { "x-api-key": key }, body });

async function createApp(): Promise<string> {
  const name = `live-${uniq()}`;
  const r = await manage("/applications", {
    name,
    server_id: serverId,
    linked_container_name: name,
    container_port: 8080,
    fqdns: [`${name}.live.test`],
    git_repository: repoPath,
    build: { type: "dockerfile" },
  });
  if (r.status !== 201) throw new Error(`create app: ${describe(r)}`);
  return String(r.json.id);
}

const appPath = (appId: string, suffix: string) => `/tenants/${c.tenantId}/applications/${appId}${suffix}`;

async function deploy(appId: string, timeoutSeconds: number): Promise<string> {
  const r = await manage(appPath(appId, "/deploy"), { timeout_seconds: timeoutSeconds });
  if (r.status !== 202) throw new Error(`deploy: ${describe(r)}`);
  return String(r.json.deployment_id);
}

interface Event {
  event: string;
  data: Record<string, unknown>;
  receivedAt: number;
}

/** An open live log: its status, the events so far (as they arrive), its close. */
class Stream {
  readonly events: Event[] = [];
  status = 0;
  body = "";
  ended: Promise<void> = Promise.resolve();
  readonly #abort = new AbortController();

  static async open(appId: string, deploymentId: string, key: string): Promise<Stream> {
    const s = new Stream();
    const res = await fetch(`${c.baseUrl}/api${appPath(appId, `/deployments/${deploymentId}/log`)}`, {
      headers: { "x-api-key": key },
      signal: s.#abort.signal,
    });
    s.status = res.status;
    if (res.status !== 200) {
      s.body = await res.text();
      s.retryAfter = res.headers.get("retry-after");
      return s;
    }
    s.ended = s.#read(res.body!).catch(() => undefined);
    return s;
  }

  retryAfter: string | null = null;

  async #read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffered = "";
    for await (const chunk of body) {
      buffered += decoder.decode(chunk, { stream: true });
      for (let i = buffered.indexOf("\n\n"); i >= 0; i = buffered.indexOf("\n\n")) {
        const block = buffered.slice(0, i);
        buffered = buffered.slice(i + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event && data) this.events.push({ event, data: JSON.parse(data), receivedAt: Date.now() });
      }
    }
  }

  close(): Promise<void> {
    this.#abort.abort();
    return this.ended;
  }
}

test.serial(
  "finding 3 - live logs are bounded per credential and per tenant (429 with a detail)",
  async (t) => {
    const appId = await createApp();
    const id = await deploy(appId, 600);
    const open: Stream[] = [];
    t.teardown(() => Promise.all(open.map((s) => s.close())).then(() => undefined));
    for (let i = 0; i < PER_KEY; i++) {
      const s = await Stream.open(appId, id, keys[0]!);
      t.is(s.status, 200, s.body);
      open.push(s);
    }
    const overKey = await Stream.open(appId, id, keys[0]!);
    t.is(overKey.status, 429, overKey.body);
    t.is(
      JSON.parse(overKey.body).detail,
      `at most ${PER_KEY} deployment live logs may be open at once per key: close one first`,
    );
    t.is(overKey.retryAfter, "5");

    // Another credential of the tenant gets the tenant's last place, then the tenant's bound holds.
    const other = await Stream.open(appId, id, keys[1]!);
    t.is(other.status, 200, other.body);
    open.push(other);
    const overTenant = await Stream.open(appId, id, keys[1]!);
    t.is(overTenant.status, 429, overTenant.body);
    t.is(
      JSON.parse(overTenant.body).detail,
      `at most ${PER_TENANT} deployment live logs may be open at once per tenant: close one first`,
    );

    // Closing a stream frees its place.
    await open.shift()!.close();
    const again = await pollUntil(
      async () => {
        const s = await Stream.open(appId, id, keys[0]!);
        if (s.status === 200) return s;
        return undefined;
      },
      { what: "a place freed by the closed stream", timeoutMs: 15_000 },
    );
    open.push(again);
    // The refusals changed nothing: the deployment still waits for its agent.
    const d = await manage(appPath(appId, `/deployments/${id}`));
    t.is(d.json.status, "queued", describe(d));
  },
);

test.serial(
  "finding 3 - a stream learns of a queue line and of the end when they are written, not on a timer",
  async (t) => {
    const appId = await createApp();
    // The first times out in the queue after ~3 s; the second waits for it, then for the agent.
    const first = await deploy(appId, 3);
    const second = await deploy(appId, 600);
    const a = await Stream.open(appId, first, keys[0]!);
    const b = await Stream.open(appId, second, keys[1]!);
    t.teardown(() => Promise.all([a.close(), b.close()]).then(() => undefined));
    t.is(a.status, 200, a.body);
    t.is(b.status, 200, b.body);

    await a.ended;
    const end = a.events.at(-1)!;
    t.is(end.event, "end");
    t.is(end.data.status, "timeout");
    // A stream without an announcement looks again only after 15 s: this came with the done event.
    const lateEnd = end.receivedAt - Date.parse(String(end.data.finished_at));
    t.true(lateEnd < 3000, `the end arrived ${lateEnd} ms after the deployment finished`);

    const waited = await pollUntil(
      async () => b.events.find((e) => e.event === "progress" && /finished; waited/.test(String(e.data.log))),
      { what: "the second deployment's queue line saying the first finished", timeoutMs: 10_000 },
    );
    const lateLine = waited.receivedAt - Date.parse(String(waited.data.at));
    t.true(lateLine < 3000, `the queue line arrived ${lateLine} ms after it was written`);
    t.true(
      b.events.some((e) => e.event === "progress" && /waiting for deployment/.test(String(e.data.log))),
      "the line written before the stream opened came first",
    );
  },
);
