// POST /reboot through a cloud provider's API. Each provider is a local HTTP server
// that follows the provider's public API documentation (request and answer shapes,
// status codes, error bodies); it records what it was asked. The machine's "reboot"
// is done by the test: stop the agent, give it a new boot id, start it again.
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { type IncomingMessage, type Server, createServer } from "node:http";
import { join } from "node:path";
import test from "ava";
import { Agent } from "./harness/agent";
import { assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type RequestOptions, api, request, waitForOperationEnd } from "./harness/http";
import { listenOnFreePort } from "@relayctl/devkit";

interface Seen {
  method: string;
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: string;
}

interface FakeProvider {
  url: string;
  seen: Seen[];
  server: Server;
}

const GOOD_TOKEN = `tok-${randomUUID()}`;

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let s = "";
    req.on("data", (d) => {
      s += d;
    });
    req.on("end", () => resolve(s));
  });
}

/**
 * Hetzner Cloud (docs.hetzner.cloud): POST /v1/servers/{id}/actions/reboot → 201
 * {"action": {...}}; a bad token → 401 {"error": {"code": "unauthorized", "message": ...}}.
 * DigitalOcean (docs.digitalocean.com/reference/api): POST /v2/droplets/{id}/actions with
 * {"type": "reboot"} → 201 {"action": {...}}; a bad token → 401 {"id": "unauthorized", "message": ...}.
 */
async function fakeProvider(kind: "hetzner" | "digitalocean"): Promise<FakeProvider> {
  const seen: Seen[] = [];
  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    seen.push({
      method: req.method ?? "",
      path: req.url ?? "",
      authorization: req.headers.authorization,
      contentType: req.headers["content-type"],
      body,
    });
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(value));
    };
    if (req.headers.authorization !== `Bearer ${GOOD_TOKEN}`) {
      return kind === "hetzner"
        ? json(401, { error: { code: "unauthorized", message: "unable to authenticate", details: {} } })
        : json(401, { id: "unauthorized", message: "Unable to authenticate you" });
    }
    const started = new Date().toISOString();
    if (kind === "hetzner") {
      const m = /^\/v1\/servers\/(\d+)\/actions\/reboot$/.exec(req.url ?? "");
      if (req.method !== "POST" || !m)
        return json(404, { error: { code: "not_found", message: "not found" } });
      return json(201, {
        action: {
          id: 13,
          command: "reboot_server",
          status: "running",
          progress: 0,
          started: started,
          finished: null,
          resources: [{ id: Number(m[1]), type: "server" }],
          error: null,
        },
      });
    }
    const m = /^\/v2\/droplets\/(\d+)\/actions$/.exec(req.url ?? "");
    if (req.method !== "POST" || !m) return json(404, { id: "not_found", message: "not found" });
    if (JSON.parse(body || "{}").type !== "reboot")
      return json(422, { id: "unprocessable_entity", message: "type is invalid" });
    return json(201, {
      action: {
        id: 36804751,
        status: "in-progress",
        type: "reboot",
        started_at: started,
        completed_at: null,
        resource_id: Number(m[1]),
        resource_type: "droplet",
        region_slug: "nyc3",
      },
    });
  });
  const port = await listenOnFreePort(server);
  return { url: `http://127.0.0.1:${port}/${kind === "hetzner" ? "v1" : "v2"}`, seen, server };
}

const dir = makeTempDir("reboot-provider");
let c: Cluster;
let apiKey: string;
let hetzner: FakeProvider;
let digitalocean: FakeProvider;

test.before(async () => {
  [hetzner, digitalocean] = await Promise.all([fakeProvider("hetzner"), fakeProvider("digitalocean")]);
  c = await startCluster({
    serverEnv: {
      RELAYCTL_HETZNER_API_URL: hetzner.url,
      RELAYCTL_DIGITALOCEAN_API_URL: digitalocean.url,
      RELAYCTL_REBOOT_TIMEOUT_SECONDS: "60",
    },
  });
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ops"])).key);
});
test.after.always(async () => {
  hetzner?.server.close();
  digitalocean?.server.close();
  await cleanupAll();
});

const mgmt = (path: string, opts: RequestOptions = {}) =>
  request(c, `/api${path}`, { ...opts, key: null, headers: { "x-api-key": apiKey } });

/** A server with a started agent whose boot id is in its own file. */
async function machine() {
  const server = await c.addServer({ start: false });
  const bootFile = join(dir, `${server.serverName}.boot_id`);
  writeFileSync(bootFile, `${randomUUID()}\n`);
  const agent = new Agent(server.stateDir, c.dir, { RELAYCTL_AGENT_BOOT_ID_FILE: bootFile });
  await agent.start();
  return { ...server, agent, bootFile };
}

for (const kind of ["hetzner", "digitalocean"] as const) {
  test.serial(
    `reboot - ${kind}: the provider's API reboots it; completed when the agent is back`,
    async (t) => {
      const fake = kind === "hetzner" ? hetzner : digitalocean;
      const m = await machine();
      const bound = await mgmt(`/servers/${m.serverId}/provider`, {
        method: "PUT",
        body: { provider: kind, provider_server_id: "4711", token: GOOD_TOKEN },
      });
      t.is(bound.status, 200, describe(bound));
      t.deepEqual(bound.json, { server_id: m.serverId, provider: kind, provider_server_id: "4711" });

      fake.seen.length = 0;
      const res = await api(c, "/reboot", { body: { server_id: m.serverId, run_id: `r-${kind}` } });
      t.is(res.status, 202, describe(res));
      t.is(res.json.status, "running", describe(res));
      const id = String(res.json.operation_id);
      await waitFor(() => fake.seen.length === 1);
      const call = fake.seen[0]!;
      t.is(call.method, "POST");
      t.is(call.authorization, `Bearer ${GOOD_TOKEN}`);
      if (kind === "hetzner") {
        t.is(call.path, "/v1/servers/4711/actions/reboot");
      } else {
        t.is(call.path, "/v2/droplets/4711/actions");
        t.is(call.contentType, "application/json");
        t.deepEqual(JSON.parse(call.body), { type: "reboot" });
      }

      // The provider reboots the machine: the agent goes away and comes back with a new boot id.
      await m.agent.stop();
      t.is((await api(c, `/operations/${id}`)).json.status, "running");
      writeFileSync(m.bootFile, `${randomUUID()}\n`);
      await m.agent.start();
      const op = await waitForOperationEnd(c, id, 15_000);
      t.is(op.json.status, "completed", describe(op));
      t.regex(String((op.json.result as Record<string, unknown>).stdout), /^rebooted: boot id \S+ -> \S+\n$/);

      const dump = await c.db.dumpText();
      t.true(dump.includes("server_providers"), "the dump covers the bindings table");
      t.false(dump.includes(GOOD_TOKEN), "the token is not stored in plaintext");
      await m.agent.stop();
    },
  );

  test.serial(
    `reboot - ${kind}: a provider answering 401 ends the operation failed with its reason`,
    async (t) => {
      const m = await machine();
      const bound = await mgmt(`/servers/${m.serverId}/provider`, {
        method: "PUT",
        body: { provider: kind, provider_server_id: "99", token: "revoked-token" },
      });
      t.is(bound.status, 200, describe(bound));
      const res = await api(c, "/reboot", { body: { server_id: m.serverId } });
      t.is(res.status, 202, describe(res));
      const op = await waitForOperationEnd(c, String(res.json.operation_id), 15_000);
      t.is(op.json.status, "failed", describe(op));
      const stderr = String((op.json.result as Record<string, unknown>).stderr);
      t.regex(stderr, /answered 401/, stderr);
      t.regex(stderr, /unable to authenticate/i, stderr);
      t.false(stderr.includes("revoked-token"));
      await m.agent.stop();
    },
  );
}

test.serial("reboot - provider bindings: DELETE unbinds (204, then 404); bad input 422", async (t) => {
  const m = await c.addServer({ start: false });
  const path = `/servers/${m.serverId}/provider`;
  const put = (body: Record<string, unknown>) => mgmt(path, { method: "PUT", body });
  assertDetailOnly(t, await put({ provider: "aws", provider_server_id: "1", token: "x" }), 422);
  assertDetailOnly(t, await put({ provider: "hetzner", provider_server_id: "abc", token: "x" }), 422);
  assertDetailOnly(t, await put({ provider: "hetzner", provider_server_id: "1" }), 422);
  const other = `/servers/${randomUUID()}/provider`;
  assertDetailOnly(
    t,
    await mgmt(other, { method: "PUT", body: { provider: "hetzner", provider_server_id: "1", token: "x" } }),
    404,
  );
  t.is((await put({ provider: "hetzner", provider_server_id: "1", token: "x" })).status, 200);
  t.is((await mgmt(path, { method: "DELETE" })).status, 204);
  assertDetailOnly(t, await mgmt(path, { method: "DELETE" }), 404);
  // Unbound and no agent: the agent path, which answers 409.
  t.is((await api(c, "/reboot", { body: { server_id: m.serverId } })).status, 409);
});

async function waitFor(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}
