// Issue 30, the web edge (findings 4, 8, 10, 15), each through the real control
// plane over HTTP: no open redirect through a self-registered OAuth client, /mcp
// refused to foreign browser origins, a malformed Host answered 400 everywhere,
// URLs never taken from a forged Host (and RELAYCTL_PUBLIC_URL required off
// loopback), and the headers and cookies every answer owes a browser.
import { request as httpRequest } from "node:http";
import { run } from "@relayctl/devkit";
import test from "ava";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ControlPlane, startControlPlane } from "./harness/control-plane";
import { type Dash, signInDash } from "./harness/dashboard-session";
import { AUTOMATION_PREFIX, request } from "./harness/http";
import { Browser, type Person, createOwner } from "./harness/people";
import { cleanEnv } from "./harness/process";
import { SERVER_MAIN } from "./harness/programs";

/** relayctl behind a TLS proxy it was told about only through RELAYCTL_PUBLIC_URL. */
const PUBLIC_URL = "https://relayctl.example.test";
/** The dashboard's CSP (dashboard/static.ts): /docs must be held to the same. */
const DASHBOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

let c: Cluster;
let owner: Person;
let dash: Dash;
/** A second api process on the same database, with RELAYCTL_PUBLIC_URL=https://…. */
let httpsApi: ControlPlane;

test.before(async () => {
  c = await startCluster();
  owner = await createOwner(c.db.url, c.tenantId);
  dash = await signInDash(c.baseUrl, owner);
  httpsApi = await startControlPlane({
    role: "api",
    databaseUrl: c.db.url,
    natsUrl: c.nats.url,
    dir: c.dir,
    publicGatewayUrl: c.gateway.gatewayUrl,
    env: { RELAYCTL_PUBLIC_URL: PUBLIC_URL },
  });
});
test.after.always(async () => {
  await httpsApi?.stop();
  await cleanupAll();
});

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** A request with a Host header of our choosing (fetch never sends one but the URL's). */
function rawRequest(
  baseUrl: string,
  path: string,
  headers: Record<string, string>,
  method = "GET",
  body?: string,
): Promise<Raw> {
  const u = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: u.hostname, port: u.port, path, method, headers, setHost: false, timeout: 30_000 },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => {
          text += d;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on("error", reject);
    req.on("timeout", () => req.destroy(new Error(`${path}: no answer`)));
    req.end(body);
  });
}

async function registerClient(redirect: string): Promise<string> {
  const res = await request(c, "/oauth/register", {
    key: null,
    body: { client_name: "Totally relayctl", redirect_uris: [redirect] },
  });
  if (res.status !== 201) throw new Error(`register: ${res.status} ${res.text}`);
  return String(res.json.client_id);
}

async function codesOf(clientId: string): Promise<number> {
  const rows = await c.db.query<{ n: number }>(
    "SELECT COUNT(*) AS n FROM oauth_authorization_codes WHERE client_id = ?",
    [clientId],
  );
  return Number(rows[0]?.n ?? 0);
}

// Finding 4 (RFC 9700 §4.11.2).
test("oauth authorize - a self-registered client's request errors are shown, never redirected to it, before consent", async (t) => {
  const evil = "https://evil.example/landing";
  const clientId = await registerClient(evil);
  const bad = [
    `client_id=${clientId}&response_type=x`,
    `client_id=${clientId}&response_type=code`,
    `client_id=${clientId}&response_type=code&code_challenge=${"a".repeat(43)}&code_challenge_method=plain`,
    `client_id=${clientId}&response_type=code&code_challenge=${"a".repeat(43)}&code_challenge_method=S256&resource=https://elsewhere.example`,
  ];
  const signedIn = new Browser(c.baseUrl);
  await signedIn.signIn(owner);
  for (const [who, b] of [
    ["no session", new Browser(c.baseUrl)],
    ["signed in", signedIn],
  ] as const) {
    for (const q of bad) {
      const page = await b.request("GET", `/oauth/authorize?${q}`, undefined, false);
      t.is(page.status, 400, `${who}: ${q}`);
      t.is(page.headers.get("location"), null, `${who}: ${q}`);
      t.regex(page.text, /Sign-in request refused/);
      t.false(page.text.includes("evil.example"), `${who}: ${q}`);
    }
  }
  t.is(await codesOf(clientId), 0);

  // A valid request still leads to sign-in, and a denial after consent still goes back to the client.
  const good = `client_id=${clientId}&response_type=code&code_challenge=${"a".repeat(43)}&code_challenge_method=S256&state=s1`;
  const anon = await new Browser(c.baseUrl).request("GET", `/oauth/authorize?${good}`, undefined, false);
  t.is(anon.status, 303);
  t.regex(anon.headers.get("location") ?? "", /^\/login\?next=/);
  const consent = await signedIn.request("GET", `/oauth/authorize?${good}`, undefined, false);
  t.is(consent.status, 200);
  t.regex(consent.text, /Allow access\?/);
});

// Finding 8: the MCP transport's Origin rule (DNS rebinding).
test("mcp - a browser page of a foreign origin is refused 403 before anything runs; loopback and no Origin pass", async (t) => {
  const init = {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
  };
  const headers = { accept: "application/json, text/event-stream" };
  for (const origin of ["https://evil.example", "null", "http://127.0.0.1.evil.example", "file://"]) {
    const res = await request(c, "/mcp", { body: init, headers: { ...headers, origin } });
    t.is(res.status, 403, origin);
    t.deepEqual(Object.keys(res.json), ["detail"], origin);
    t.regex(String(res.json.detail), /may not call \/mcp/, origin);
  }
  // Refused before the credential is even looked at: no key, still 403 rather than 401.
  const anon = await request(c, "/mcp", {
    key: null,
    body: init,
    headers: { ...headers, origin: "https://evil.example" },
  });
  t.is(anon.status, 403);
  for (const origin of [new URL(c.baseUrl).origin, "http://localhost:5173", undefined]) {
    const res = await request(c, "/mcp", { body: init, headers: origin ? { ...headers, origin } : headers });
    t.is(res.status, 200, `${origin}: ${res.text.slice(0, 300)}`);
  }
  // With RELAYCTL_PUBLIC_URL, its origin is the page that may call.
  const viaPublic = await request({ baseUrl: httpsApi.apiUrl, key: c.key }, "/mcp", {
    body: init,
    headers: { ...headers, origin: PUBLIC_URL },
  });
  t.is(viaPublic.status, 200, viaPublic.text.slice(0, 300));
});

test("host - a malformed Host header is answered 400 on every kind of route, never 500", async (t) => {
  const paths: [string, string, Record<string, string>?][] = [
    ["GET", "/healthz"],
    ["GET", "/api/me"],
    ["POST", "/mcp", { authorization: `Bearer ${c.key}`, "content-type": "application/json" }],
    ["GET", "/oauth/authorize?client_id=x"],
    ["GET", "/.well-known/oauth-authorization-server"],
    ["GET", "/install.sh"],
    ["GET", "/login"],
    ["GET", "/docs"],
    ["GET", `${AUTOMATION_PREFIX}/operations`, { authorization: `Bearer ${c.key}` }],
    ["GET", "/no-such-route"],
  ];
  for (const host of ["[::1", "a b", "a/b", "[zz]", "a@b", "[1.2.3.4]"]) {
    for (const [method, path, extra] of paths) {
      const res = await rawRequest(
        c.baseUrl,
        path,
        { host, ...extra },
        method,
        method === "POST" ? "{}" : undefined,
      );
      t.is(res.status, 400, `${host} ${method} ${path}: ${res.text.slice(0, 200)}`);
      // The OAuth server's endpoints answer in OAuth's own error shape (RFC 6749 §5.2).
      const body = JSON.parse(res.text);
      const detail = path.startsWith("/.well-known/oauth-authorization-server")
        ? { error: "invalid_request", error_description: body.error_description }
        : { detail: body.detail };
      t.deepEqual(body, detail, `${host} ${path}`);
      t.is(body.detail ?? body.error_description, "Host header is not a host name", `${host} ${path}`);
    }
  }
  t.false(/RC_ERR_INTERNAL|"internal error"/.test(c.api.logText()));
});

// Finding 10.
test("urls - without RELAYCTL_PUBLIC_URL a forged Host never becomes relayctl's address; a localhost Host does", async (t) => {
  const forged = "evil.example";
  const probes: [string, string, Record<string, string>, string?][] = [
    ["GET", "/.well-known/oauth-authorization-server", {}],
    ["GET", "/.well-known/oauth-protected-resource/mcp", {}],
    [
      "POST",
      "/oauth/device/code",
      { "content-type": "application/x-www-form-urlencoded" },
      "client_id=relayctl-cli",
    ],
    ["GET", "/install.sh", {}],
    ["GET", "/agent/latest", {}],
    ["GET", "/cli/install.sh", {}],
  ];
  for (const [method, path, headers, body] of probes) {
    const res = await rawRequest(c.baseUrl, path, { ...headers, host: forged }, method, body);
    t.false(res.text.includes(forged), path);
    // /agent/latest reads the bundles first: without `make build` it is 503 before any URL.
    if (path === "/agent/latest" && res.status === 503 && /not built/.test(res.text)) continue;
    t.is(res.status, 400, `${path}: ${res.status} ${res.text.slice(0, 200)}`);
    t.regex(res.text, /RELAYCTL_PUBLIC_URL/, path);
  }
  const port = new URL(c.baseUrl).port;
  const local = await rawRequest(c.baseUrl, "/.well-known/oauth-authorization-server", {
    host: `localhost:${port}`,
  });
  t.is(local.status, 200);
  t.is(JSON.parse(local.text).issuer, `http://localhost:${port}`);

  // Told the address, relayctl uses it whatever the Host says.
  const told = await rawRequest(httpsApi.apiUrl, "/.well-known/oauth-authorization-server", { host: forged });
  t.is(told.status, 200);
  t.is(JSON.parse(told.text).issuer, PUBLIC_URL);
  const invite = await rawRequest(
    httpsApi.apiUrl,
    "/api/users/invites",
    {
      host: forged,
      "x-api-key": String((await dash.call("POST", "/api/api-keys", { name: "invites" })).json.key),
      "content-type": "application/json",
    },
    "POST",
    JSON.stringify({ email: `m-${Date.now()}@example.test`, role: "owner" }),
  );
  t.is(invite.status, 201, invite.text);
  t.true(String(JSON.parse(invite.text).invite_url).startsWith(`${PUBLIC_URL}/invite/`));
});

test("urls - an api listening off loopback does not start without RELAYCTL_PUBLIC_URL, and says so", async (t) => {
  const env = cleanEnv({
    RELAYCTL_ROLE: "api",
    RELAYCTL_DATABASE_URL: c.db.url,
    RELAYCTL_NATS_URL: c.nats.url,
    RELAYCTL_API_LISTEN: "0.0.0.0:0",
    RELAYCTL_LOG_LEVEL: "warn",
  });
  const err = await t.throwsAsync(run(process.execPath, [SERVER_MAIN, "serve"], { env, timeoutMs: 60_000 }));
  t.regex(
    String(err?.message),
    /RELAYCTL_PUBLIC_URL: required when the api listens on 0\.0\.0\.0 \(not loopback\)/,
  );
});

// Finding 15.
test("headers - /api/ answers are no-store: /api/me, operations, deployments and keys", async (t) => {
  const app = await dash.call("POST", "/api/applications", {
    name: `edge-${Math.random().toString(36).slice(2, 8)}`,
    server_id: c.serverId,
    linked_container_name: "edge-web",
    container_port: 8080,
    git_repository: "https://git.example.test/edge.git",
  });
  t.is(app.status, 201, app.text);
  const base = `/api/tenants/${c.tenantId}/applications/${app.json.id}`;
  const reads = [
    "/api/me",
    "/api/operations",
    `${base}/deployments`,
    "/api/automation-keys",
    "/api/api-keys",
    "/api/me/sessions",
  ];
  for (const path of reads) {
    const res = await dash.call("GET", path);
    t.is(res.status, 200, `${path}: ${res.text.slice(0, 200)}`);
    t.is(res.headers.get("cache-control"), "no-store", path);
  }
  // An operation of the Automation API, listed and read with the key.
  const op = await request(c, `${AUTOMATION_PREFIX}/exec`, {
    body: { server_id: c.serverId, command: "echo edge", run_id: "edge-run" },
  });
  t.true(op.status === 200 || op.status === 202, op.text);
  for (const path of [
    `${AUTOMATION_PREFIX}/operations?run_id=edge-run`,
    `${AUTOMATION_PREFIX}/operations/${op.json.operation_id}`,
  ]) {
    const res = await request(c, path);
    t.is(res.status, 200, `${path}: ${res.text.slice(0, 200)}`);
    t.is(res.headers.get("cache-control"), "no-store", path);
  }
});

test("headers - HSTS and Secure cookies when RELAYCTL_PUBLIC_URL is https, not otherwise; the session cookie once", async (t) => {
  for (const path of ["/healthz", "/login", "/docs/", "/api/me"]) {
    const res = await fetch(`${httpsApi.apiUrl}${path}`, { redirect: "manual" });
    t.is(res.headers.get("strict-transport-security"), "max-age=31536000", path);
    const plain = await fetch(`${c.baseUrl}${path}`, { redirect: "manual" });
    t.is(plain.headers.get("strict-transport-security"), null, path);
  }
  for (const [baseUrl, secure] of [
    [httpsApi.apiUrl, true],
    [c.baseUrl, false],
  ] as const) {
    const b = new Browser(baseUrl);
    const login = await b.get("/login");
    const csrf = login.headers.getSetCookie().filter((x) => x.startsWith("relayctl_login_csrf="));
    t.is(csrf.length, 1);
    t.is(/;\s*Secure/i.test(csrf[0]!), secure, baseUrl);
    const form = /name="csrf_token" value="([^"]*)"/.exec(login.text)?.[1] ?? "";
    const signed = await b.request(
      "POST",
      "/login",
      { csrf_token: form, next: "/account", email: owner.email, password: owner.password },
      false,
    );
    t.is(signed.status, 303, signed.text.slice(0, 200));
    const cookies = signed.headers.getSetCookie();
    const session = cookies.filter((x) => x.startsWith("relayctl_session="));
    t.is(session.length, 1, cookies.join(" | "));
    t.is(cookies.filter((x) => x.startsWith("relayctl_login_csrf=")).length, 1, cookies.join(" | "));
    for (const cookie of cookies) t.is(/;\s*Secure/i.test(cookie), secure, cookie);
  }
});

test("headers - /docs has the dashboard's CSP and frame rules", async (t) => {
  for (const path of ["/docs", "/docs/", "/docs/static/swagger-initializer.js", "/docs/json"]) {
    const res = await fetch(`${c.baseUrl}${path}`, { redirect: "manual" });
    t.true(res.status < 400, `${path}: ${res.status}`);
    t.is(res.headers.get("content-security-policy"), DASHBOARD_CSP, path);
    t.is(res.headers.get("x-frame-options"), "DENY", path);
    t.is(res.headers.get("x-content-type-options"), "nosniff", path);
  }
});
