// Issue 30, finding 5: the OAuth scopes relayctl grants (read, deploy, exec,
// admin) are published, shown, checked when asked for and enforced on every
// route from the manifest, a token's power being the intersection of its
// scopes and its person's role. Before, `scope=read:only` was stored and echoed
// and its token ran exec.
import { randomUUID } from "node:crypto";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import test from "ava";
import type { FastifyInstance } from "fastify";
import { apiRoutes } from "../control-plane/src/api/routes";
import { type Needs, type OAuthScope, personRefusal, scopeFor } from "../control-plane/src/auth/roles";
import { loadConfig } from "../control-plane/src/config";
import type { ApiContext } from "../control-plane/src/http/context";
import { type RouteSpec, credentialsOf, needsOf } from "../control-plane/src/http/route";
import { sha256Hex } from "../control-plane/src/lib/secrets";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec, request } from "./harness/http";
import { Browser, type Person, createOwner, deviceTokens, postForm } from "./harness/people";

let c: Cluster;
let owner: Person;
let ownerToken: string;

const ctx = {
  config: loadConfig({ RELAYCTL_DATABASE_URL: "sqlite://:memory:", RELAYCTL_BUS: "memory" }),
} as unknown as ApiContext;
const manifest: RouteSpec[] = apiRoutes(ctx, () => [], {} as FastifyInstance, new AbortController().signal);
const personRoutes = manifest
  .filter((r) => credentialsOf(r.access).includes("access_token"))
  .flatMap((r) => [r.method].flat().map((method) => ({ method, url: r.url, needs: needsOf(r) as Needs })));

test.before(async () => {
  c = await startCluster();
  owner = await createOwner(c.db.url, c.tenantId);
  const b = new Browser(c.baseUrl);
  await b.signIn(owner);
  ownerToken = (await deviceTokens(c.baseUrl, b)).access_token;
});
test.after.always(cleanupAll);

/** Another owner of the tenant (each makes its own requests: a person's limit is 100 a minute). */
async function anotherOwner(): Promise<Person> {
  const email = `owner-${randomUUID().slice(0, 8)}@example.test`;
  const r = await request(c, "/api/users/invites", { key: ownerToken, body: { email, role: "owner" } });
  if (r.status !== 201) throw new Error(`invite: ${r.status} ${r.text}`);
  const password = `pw-${randomUUID()}`;
  const accepted = await new Browser(c.baseUrl).post(new URL(String(r.json.invite_url)).pathname, {
    password,
  });
  if (accepted.status !== 201) throw new Error(`accept: ${accepted.status} ${accepted.text}`);
  return { email, password, id: "" };
}

async function tokenWith(person: Person, scope: string) {
  const b = new Browser(c.baseUrl);
  await b.signIn(person);
  return deviceTokens(c.baseUrl, b, scope);
}

// The tests that count operations run one at a time (test.serial): another's exec would count.
const operations = async () =>
  Number((await c.db.query("SELECT COUNT(*) AS n FROM operations WHERE tenant_id = ?", [c.tenantId]))[0].n);

test("scopes - the discovery documents publish the scopes; an unknown scope is invalid_scope and starts nothing", async (t) => {
  const as = await request(c, "/.well-known/oauth-authorization-server", { key: null });
  t.deepEqual(as.json.scopes_supported, ["read", "deploy", "exec", "admin"]);
  const prm = await request(c, "/.well-known/oauth-protected-resource/mcp", { key: null });
  t.deepEqual(prm.json.scopes_supported, ["read", "deploy", "exec"], "what the MCP tools need");

  const before = await c.db.query("SELECT COUNT(*) AS n FROM oauth_device_authorizations");
  for (const scope of ["read:only", "read admin root", "*"]) {
    const r = await postForm(c.baseUrl, "/oauth/device/code", { client_id: "relayctl-cli", scope });
    t.is(r.status, 400, scope);
    t.is(r.json.error, "invalid_scope", scope);
    t.false("device_code" in r.json, scope);
  }
  t.deepEqual(await c.db.query("SELECT COUNT(*) AS n FROM oauth_device_authorizations"), before);

  // The authorization code grant: shown as an error page (a self-registered client), no code.
  const reg = await request(c, "/oauth/register", {
    key: null,
    body: { client_name: "scoped", redirect_uris: ["http://127.0.0.1:9/cb"] },
  });
  const clientId = String(reg.json.client_id);
  const signedIn = new Browser(c.baseUrl);
  await signedIn.signIn(owner);
  const q = `client_id=${clientId}&response_type=code&code_challenge=${"a".repeat(43)}&code_challenge_method=S256&scope=read:only`;
  const page = await signedIn.request("GET", `/oauth/authorize?${q}`, undefined, false);
  t.is(page.status, 400);
  t.is(page.headers.get("location"), null);
  t.regex(page.text, /invalid_scope/);
  const codes = await c.db.query("SELECT COUNT(*) AS n FROM oauth_authorization_codes WHERE client_id = ?", [
    clientId,
  ]);
  t.is(Number(codes[0].n), 0);
  // A known scope reaches the consent page, which names it and what it allows.
  const ok = q.replace("scope=read:only", "scope=read%20deploy");
  const consent = await signedIn.request("GET", `/oauth/authorize?${ok}`, undefined, false);
  t.is(consent.status, 200);
  t.regex(consent.text, /<code>read<\/code>: read servers/);
  t.regex(consent.text, /<code>deploy<\/code>: deploy, roll back/);
  t.notRegex(consent.text, /<code>exec<\/code>/);
});

test.serial(
  "scopes - the device page shows the scopes asked for; the token answer says what was granted; no scope gets read and deploy",
  async (t) => {
    const d = await postForm(c.baseUrl, "/oauth/device/code", {
      client_id: "relayctl-cli",
      scope: "read exec",
    });
    t.is(d.status, 200, d.text);
    const b = new Browser(c.baseUrl);
    await b.signIn(owner);
    const form = await b.get(String(d.json.verification_uri_complete));
    const csrf = /name="csrf_token" value="([^"]+)"/.exec(form.text)![1];
    const confirm = await b.post("/device", { csrf_token: csrf, user_code: String(d.json.user_code) });
    t.is(confirm.status, 200);
    t.regex(confirm.text, /with the scopes <code>read exec<\/code>/);
    t.regex(confirm.text, /<code>exec<\/code>: run shell commands on servers/);

    const defaulted = await postForm(c.baseUrl, "/oauth/device/code", { client_id: "relayctl-cli" });
    const b2 = new Browser(c.baseUrl);
    await b2.signIn(owner);
    await b2.answerDevice(String(defaulted.json.verification_uri_complete), "approve");
    const tokens = await postForm(c.baseUrl, "/oauth/token", {
      grant_type: "urn:ietf:params:oauth:grant-type:device_code",
      device_code: String(defaulted.json.device_code),
      client_id: "relayctl-cli",
    });
    t.is(tokens.json.scope, "read deploy");
    const before = await operations();
    const r = await exec(c, { server_id: c.serverId, command: "true" }, String(tokens.json.access_token));
    t.is(r.status, 403);
    t.regex(String(r.json.detail), /needs the OAuth scope 'exec'; this token has 'read deploy'/);
    t.is(await operations(), before);
  },
);

test.serial(
  "scopes - the finding: a token stored as scope=read:only no longer runs exec, even an owner's",
  async (t) => {
    const { access_token } = await tokenWith(owner, "read deploy exec admin");
    const ran = await exec(c, { server_id: c.serverId, command: "true" }, access_token);
    t.is(ran.status, 200, "the same owner's token with exec runs it");
    await c.db.query("UPDATE oauth_tokens SET scope = 'read:only' WHERE token_hash = ?", [
      sha256Hex(access_token),
    ]);
    const before = await operations();
    const r = await exec(c, { server_id: c.serverId, command: "podman inspect --all" }, access_token);
    t.is(r.status, 403);
    t.regex(String(r.json.detail), /needs the OAuth scope 'exec'/);
    t.is(await operations(), before, "nothing ran");
  },
);

test("scopes - every route of the manifest, every scope (an owner's token): 403 exactly when the scope does not cover the route", async (t) => {
  const scopes: OAuthScope[] = ["read", "deploy", "exec", "admin"];
  const classes = new Set(personRoutes.map((r) => scopeFor(r.needs)));
  t.deepEqual([...classes].sort(), [...scopes].sort(), "every scope guards some route");
  const tokens = await Promise.all(
    scopes.map(async (s) => ({ scope: s, token: (await tokenWith(await anotherOwner(), s)).access_token })),
  );
  for (const { scope, token } of tokens) {
    for (const r of personRoutes) {
      const res = await request(
        c,
        r.url.replace(":tenant_id", c.tenantId).replace(/:([a-z_]+)/g, () => randomUUID()),
        {
          key: token,
          method: r.method,
          ...(r.method !== "GET" && r.method !== "DELETE" ? { body: {} } : {}),
          timeoutMs: 15_000,
          headers: r.url === "/mcp" ? { accept: "application/json, text/event-stream" } : {},
        },
      );
      const refused = personRefusal({ role: "owner" }, r.needs, [scope]) !== null;
      const what = `${scope}: ${r.method} ${r.url} → ${res.status} ${res.text.slice(0, 160)}`;
      if (refused) {
        t.is(res.status, 403, what);
        t.regex(String(res.json.detail), /needs the OAuth scope/, what);
      } else t.false(res.status === 401 || res.status === 403, what);
    }
  }
});

test.serial(
  "scopes - MCP lists only what the token's scopes allow, and its calls are refused by the same API",
  async (t) => {
    const { access_token } = await tokenWith(owner, "read");
    const client = new Client({ name: "relayctl-test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${c.baseUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${access_token}` } },
      }),
    );
    onCleanup(() => client.close());
    const names = (await client.listTools()).tools.map((x) => x.name);
    t.true(names.includes("list_applications"), names.join(","));
    for (const acting of ["exec_command", "deploy_application", "restart_container", "rollback_application"])
      t.false(names.includes(acting), acting);
    const before = await operations();
    const call = await client.callTool({
      name: "exec_command",
      arguments: { server_id: c.serverId, command: "id" },
    });
    t.true(call.isError);
    t.regex(JSON.stringify(call.content), /HTTP 403: .*needs the OAuth scope 'exec'/);
    t.is(await operations(), before);
  },
);
