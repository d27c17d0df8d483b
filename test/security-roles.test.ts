// Issue 30, finding 9: people have roles (owner, deployer, viewer) and an owner's
// per-person `exec` grant, enforced from the route manifest. Every route a
// person may call is tried by every role with a real request through the real
// control plane: 403 exactly when the route declares more than the role (and
// grant) gives, and no auth refusal otherwise (a 4xx for an empty body or an
// unknown id is "allowed": it got past the role check). Then the finding's own
// exploit: a deployer (the old member) runs `exec` through MCP, and nothing runs.
import { randomUUID } from "node:crypto";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import test from "ava";
import type { FastifyInstance } from "fastify";
import { apiRoutes } from "../control-plane/src/api/routes";
import { type Needs, personRefusal } from "../control-plane/src/auth/roles";
import { loadConfig } from "../control-plane/src/config";
import type { ApiContext } from "../control-plane/src/http/context";
import { type RouteSpec, credentialsOf, needsOf } from "../control-plane/src/http/route";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { request } from "./harness/http";
import { Browser, type Person, createOwner, deviceTokens } from "./harness/people";

let c: Cluster;
let ownerToken: string;

/** A person of the test: their role, grant and access token (asking for every scope, so the role decides). */
interface Member {
  label: string;
  role: "owner" | "deployer" | "viewer";
  can_exec: boolean;
  person: Person;
  token: string;
}
const members: Member[] = [];

// The manifest, as the api registers it (declarations are plain data: no handler runs here).
const ctx = {
  config: loadConfig({ RELAYCTL_DATABASE_URL: "sqlite://:memory:", RELAYCTL_BUS: "memory" }),
} as unknown as ApiContext;
const manifest: RouteSpec[] = apiRoutes(ctx, () => [], {} as FastifyInstance, new AbortController().signal);

/** Every method and URL a person's access token may be sent to. */
const personRoutes = manifest
  .filter((r) => credentialsOf(r.access).includes("access_token"))
  .flatMap((r) => [r.method].flat().map((method) => ({ method, url: r.url, needs: needsOf(r) as Needs })));

async function tokenOf(person: Person): Promise<string> {
  const b = new Browser(c.baseUrl);
  await b.signIn(person);
  return (await deviceTokens(c.baseUrl, b)).access_token;
}

async function invite(role: string): Promise<Person> {
  const email = `${role}-${randomUUID().slice(0, 8)}@example.test`;
  const r = await request(c, "/api/users/invites", { key: ownerToken, body: { email, role } });
  if (r.status !== 201) throw new Error(`invite: ${r.status} ${r.text}`);
  const password = `pw-${randomUUID()}`;
  const accepted = await new Browser(c.baseUrl).post(new URL(String(r.json.invite_url)).pathname, {
    password,
  });
  if (accepted.status !== 201) throw new Error(`accept: ${accepted.status} ${accepted.text}`);
  const users = (await request(c, "/api/users", { key: ownerToken })).json.users as {
    id: string;
    email: string;
  }[];
  return { email, password, id: users.find((u) => u.email === email)!.id };
}

test.before(async () => {
  c = await startCluster();
  const owner = await createOwner(c.db.url, c.tenantId);
  ownerToken = await tokenOf(owner);
  members.push({ label: "owner", role: "owner", can_exec: false, person: owner, token: ownerToken });
  for (const role of ["deployer", "viewer"] as const) {
    const person = await invite(role);
    members.push({ label: role, role, can_exec: false, person, token: await tokenOf(person) });
  }
  // A viewer an owner trusted with exec: the grant, not the role, admits exec and registry login.
  const granted = await invite("viewer");
  const patched = await request(c, `/api/users/${granted.id}`, {
    key: ownerToken,
    method: "PATCH",
    body: { can_exec: true },
  });
  if (patched.status !== 200) throw new Error(`grant: ${patched.status} ${patched.text}`);
  members.push({
    label: "viewer+exec",
    role: "viewer",
    can_exec: true,
    person: granted,
    token: await tokenOf(granted),
  });
});
test.after.always(cleanupAll);

/** The URL with its parameters filled: this tenant, unknown ids (a handler that gets this far answers 404). */
function concrete(url: string): string {
  return url
    .replace(":tenant_id", c.tenantId)
    .replace(/:([a-z_]+)/g, (_m, name: string) =>
      name === "version" || name === "file" ? "x" : randomUUID(),
    );
}

test("roles - every route of the manifest, every role: 403 exactly below the declared role", async (t) => {
  t.true(personRoutes.length > 50, `the manifest's person routes are all here (${personRoutes.length})`);
  const classes = new Set(personRoutes.map((r) => r.needs.role + (r.needs.grant ?? "")));
  t.deepEqual(
    [...classes].sort(),
    ["deployer", "owner", "ownerexec", "viewer"],
    "every kind of need is tried",
  );
  for (const m of members) {
    for (const r of personRoutes) {
      const changes = r.method !== "GET";
      const res = await request(c, concrete(r.url), {
        key: m.token,
        method: r.method,
        ...(changes && r.method !== "DELETE" ? { body: {} } : {}),
        timeoutMs: 15_000,
        headers: r.url === "/mcp" ? { accept: "application/json, text/event-stream" } : {},
      });
      const refused = personRefusal({ role: m.role, can_exec: m.can_exec }, r.needs) !== null;
      const what = `${m.label}: ${r.method} ${r.url} → ${res.status} ${res.text.slice(0, 160)}`;
      if (refused) {
        t.is(res.status, 403, what);
        t.regex(String(res.json.detail), /needs the (owner|deployer|viewer) role/, what);
      } else {
        t.false(res.status === 401 || res.status === 403, what);
      }
    }
  }
});

test("roles - the dashboard's `may` (GET /api/me) is exactly what the manifest lets each person call", async (t) => {
  for (const m of members) {
    const me = await request(c, "/api/me", { key: m.token });
    t.is(me.status, 200);
    const expected = personRoutes
      .filter((r) => personRefusal({ role: m.role, can_exec: m.can_exec }, r.needs) === null)
      .map((r) => `${r.method} ${r.url}`);
    t.deepEqual([...(me.json.may as string[])].sort(), expected.sort(), m.label);
  }
  const viewer = (await request(c, "/api/me", { key: members.find((m) => m.label === "viewer")!.token })).json
    .may as string[];
  t.true(viewer.includes("GET /api/applications"));
  t.false(viewer.includes("POST /api/tenants/:tenant_id/applications/:application_id/deploy"));
  t.false(viewer.includes("POST /api/automation/v1/exec"));
});

test.serial(
  "roles - a deployer (the old member) cannot exec through MCP or HTTP, and nothing runs; a viewer cannot deploy",
  async (t) => {
    const deployer = members.find((m) => m.label === "deployer")!;
    const viewer = members.find((m) => m.label === "viewer")!;
    const ops = async () =>
      Number(
        (await c.db.query("SELECT COUNT(*) AS n FROM operations WHERE tenant_id = ?", [c.tenantId]))[0].n,
      );
    const before = await ops();
    const exec = await request(c, "/api/automation/v1/exec", {
      key: deployer.token,
      body: { server_id: c.serverId, command: "podman inspect --all" },
    });
    t.is(exec.status, 403);
    t.regex(String(exec.json.detail), /needs the owner role or the exec grant; you are a deployer/);
    // MCP: the tool is not listed, and a call of it is refused by the same API.
    const mcp = async (token: string) => {
      const client = new Client({ name: "relayctl-test", version: "1.0.0" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${c.baseUrl}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${token}` } },
        }),
      );
      onCleanup(() => client.close());
      return client;
    };
    const asDeployer = await mcp(deployer.token);
    const names = (await asDeployer.listTools()).tools.map((x) => x.name);
    t.true(names.includes("deploy_application"), names.join(","));
    t.false(names.includes("exec_command"), names.join(","));
    const call = await asDeployer.callTool({
      name: "exec_command",
      arguments: { server_id: c.serverId, command: "podman inspect --all" },
    });
    t.true(call.isError);
    t.regex(JSON.stringify(call.content), /HTTP 403: .*needs the owner role or the exec grant/);
    const viewerTools = (await (await mcp(viewer.token)).listTools()).tools.map((x) => x.name);
    t.false(viewerTools.includes("deploy_application"), viewerTools.join(","));
    t.false(viewerTools.includes("restart_container"), viewerTools.join(","));
    t.true(viewerTools.includes("list_applications"), viewerTools.join(","));
    t.false(viewerTools.includes("application_logs"), "an application's output is a deployer's");
    t.true(names.includes("application_logs"), names.join(","));
    t.is(await ops(), before, "no operation was created");
  },
);

test("roles - only an owner changes roles and grants; the last owner cannot step down; each change is audited", async (t) => {
  const deployer = members.find((m) => m.label === "deployer")!;
  const owner = members.find((m) => m.label === "owner")!;
  const self = await request(c, `/api/users/${deployer.person.id}`, {
    key: deployer.token,
    method: "PATCH",
    body: { role: "owner", can_exec: true },
  });
  t.is(self.status, 403);
  const users = (await request(c, "/api/users", { key: ownerToken })).json.users as {
    id: string;
    role: string;
    can_exec: boolean;
  }[];
  t.like(
    users.find((u) => u.id === deployer.person.id),
    { role: "deployer", can_exec: false },
  );
  const last = await request(c, `/api/users/${owner.person.id}`, {
    key: ownerToken,
    method: "PATCH",
    body: { role: "viewer" },
  });
  t.is(last.status, 409, last.text);
  const again = (await request(c, "/api/users", { key: ownerToken })).json.users as {
    id: string;
    role: string;
  }[];
  t.is(again.find((u) => u.id === owner.person.id)?.role, "owner");
  const audited = await c.db.query(
    "SELECT payload FROM audit_events WHERE tenant_id = ? AND event_type = 'user.changed'",
    [c.tenantId],
  );
  t.is(audited.length, 1, "the grant of the setup, and nothing refused");
});
