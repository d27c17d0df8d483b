// The OAuth 2.0 device authorization grant (RFC 8628) end to end against a running
// control plane: the client side speaks the RFCs' form-encoded requests, the person
// approves through /login and /device over HTTP as a browser would (cookies, the
// pages' CSRF tokens), and the tokens then work on the dashboard and Automation APIs
// with the person as the audit actor.
import { createHash } from "node:crypto";
import test from "ava";
import { ISO_UTC, UUID, assertCompleted, assertDetailOnly } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ControlPlane, startControlPlane } from "./harness/control-plane";
import { exec, request } from "./harness/http";
import { Browser, type Person, createOwner, hiddenField, postForm } from "./harness/people";
import { pollUntil } from "./harness/wait";

const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";
const CLIENT = "relayctl-cli";
let c: Cluster;
let owner: Person;
let browser: Browser;
/** A second api process on the same database whose device codes live 2 s. */
let shortLived: ControlPlane;

test.before(async () => {
  c = await startCluster({ serverEnv: { RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: "1" } });
  owner = await createOwner(c.db.url, c.tenantId);
  browser = new Browser(c.baseUrl);
  const signed = await browser.signIn(owner);
  if (!signed.text.includes(owner.email)) throw new Error(`sign-in failed: ${signed.status} ${signed.text}`);
  shortLived = await startControlPlane({
    role: "api",
    databaseUrl: c.db.url,
    natsUrl: c.nats.url,
    dir: c.dir,
    publicGatewayUrl: c.gateway.gatewayUrl,
    env: { RELAYCTL_OAUTH_DEVICE_CODE_TTL_SECONDS: "2", RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: "1" },
  });
});
test.after.always(async () => {
  await shortLived?.stop();
  await cleanupAll();
});

// Every scope, as the CLI asks: the tests below run commands and make keys as an owner.
const startDevice = (base = c.baseUrl) =>
  postForm(base, "/oauth/device/code", { client_id: CLIENT, scope: "read deploy exec admin" });
const poll = (deviceCode: string, base = c.baseUrl) =>
  postForm(base, "/oauth/token", { grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: CLIENT });

/** Polls at the server's interval (as a client must) until the answer is not authorization_pending. */
async function pollToEnd(deviceCode: string, intervalS: number) {
  return pollUntil(
    async () => {
      const r = await poll(deviceCode);
      return r.json.error === "authorization_pending" ? undefined : r;
    },
    { what: "the device grant to end", timeoutMs: 30_000, intervalMs: intervalS * 1000 + 100 },
  );
}

/** A device approved through the browser; returns the token answer. */
async function login() {
  const d = await startDevice();
  await browser.answerDevice(String(d.json.verification_uri_complete), "approve");
  const r = await pollToEnd(String(d.json.device_code), Number(d.json.interval));
  if (r.status !== 200) throw new Error(`token: ${r.status} ${r.text}`);
  return r.json as { access_token: string; refresh_token: string; expires_in: number };
}

const mgmt = (path: string, token: string, opts: { method?: string; body?: unknown } = {}) =>
  request(c, `/api${path}`, { ...opts, key: token });

test("oauth - metadata names the device, token and revocation endpoints (RFC 8414)", async (t) => {
  const r = await request(c, "/.well-known/oauth-authorization-server", { key: null });
  t.is(r.status, 200);
  t.is(r.json.issuer, c.baseUrl);
  t.is(r.json.device_authorization_endpoint, `${c.baseUrl}/oauth/device/code`);
  t.is(r.json.token_endpoint, `${c.baseUrl}/oauth/token`);
  t.is(r.json.revocation_endpoint, `${c.baseUrl}/oauth/revoke`);
  t.deepEqual(r.json.grant_types_supported, ["authorization_code", DEVICE_GRANT, "refresh_token"]);
  t.deepEqual(r.json.token_endpoint_auth_methods_supported, ["none"]);
});

test("oauth - device authorization answers the RFC 8628 §3.2 fields with an unambiguous user code", async (t) => {
  const r = await startDevice();
  t.is(r.status, 200, r.text);
  t.regex(String(r.json.device_code), /^rdc_[A-Za-z0-9]{40}$/);
  t.regex(String(r.json.user_code), /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
  t.is(r.json.verification_uri, `${c.baseUrl}/device`);
  t.is(r.json.verification_uri_complete, `${c.baseUrl}/device?user_code=${r.json.user_code}`);
  t.is(r.json.expires_in, 600);
  t.is(r.json.interval, 1);
  t.is(r.headers.get("cache-control"), "no-store");
  const bad = await postForm(c.baseUrl, "/oauth/device/code", { client_id: "someone-else" });
  t.is(bad.status, 401);
  t.is(bad.json.error, "invalid_client");
  t.deepEqual(Object.keys(bad.json).sort(), ["error", "error_description"]);
});

test("oauth - the full flow: pending, slow_down (interval + 5 s), approval in the browser, tokens", async (t) => {
  const d = await startDevice();
  const code = String(d.json.device_code);
  const first = await poll(code);
  t.is(first.status, 400);
  t.is(first.json.error, "authorization_pending");
  const tooFast = await poll(code);
  t.is(tooFast.json.error, "slow_down", tooFast.text);
  // The interval is now 1 + 5 s: a poll after the old interval is still too fast.
  await new Promise((r) => setTimeout(r, 1300)); // waits out the old interval on purpose
  t.is((await poll(code)).json.error, "slow_down");

  const decided = await browser.answerDevice(String(d.json.verification_uri_complete), "approve");
  t.is(decided.status, 200);
  t.regex(decided.text, /Device approved/);
  const tokens = await pollToEnd(code, 6);
  t.is(tokens.status, 200, tokens.text);
  t.regex(String(tokens.json.access_token), /^rco_/);
  t.regex(String(tokens.json.refresh_token), /^rcr_/);
  t.is(tokens.json.token_type, "Bearer");
  t.is(tokens.json.expires_in, 900);
  t.is(tokens.headers.get("cache-control"), "no-store");
  // Only SHA-256 hashes are stored, never the tokens.
  const sha = (v: unknown) => createHash("sha256").update(String(v)).digest("hex");
  const stored = await c.db.query("SELECT kind, token_hash FROM oauth_tokens WHERE token_hash IN (?, ?)", [
    sha(tokens.json.access_token),
    sha(tokens.json.refresh_token),
  ]);
  t.deepEqual(stored.map((r) => r.kind).sort(), ["access", "refresh"]);
  const leaked = await c.db.query("SELECT COUNT(*) AS n FROM oauth_tokens WHERE token_hash = ?", [
    tokens.json.access_token,
  ]);
  t.is(Number(leaked[0].n), 0);
  // A device code gives tokens once.
  const again = await poll(code);
  t.is(again.json.error, "invalid_grant");
});

test("oauth - the verification page shows which client asks, for whom, and the code; typed codes are normalised", async (t) => {
  const d = await startDevice();
  const userCode = String(d.json.user_code);
  const form = await browser.get("/device");
  t.is(form.status, 200);
  // Typed the way people type: lower case, a space instead of the dash.
  const typed = ` ${userCode.toLowerCase().replace("-", " ")} `;
  const confirm = await browser.post("/device", {
    csrf_token: hiddenField(form.text, "csrf_token"),
    user_code: typed,
  });
  t.is(confirm.status, 200, confirm.text);
  t.regex(
    confirm.text,
    /<strong>relayctl command-line client<\/strong> \(<code>relayctl-cli<\/code>\) asks to act as/,
  );
  t.true(confirm.text.includes(`<strong>${owner.email}</strong> (owner)`));
  t.true(confirm.text.includes(`Code: <code>${userCode}</code>`));
  t.is(hiddenField(confirm.text, "user_code"), userCode.replace("-", ""));
  // Looking at the request decides nothing: the device still waits.
  t.is((await poll(String(d.json.device_code))).json.error, "authorization_pending");
  const unknown = await browser.post("/device", {
    csrf_token: hiddenField(form.text, "csrf_token"),
    user_code: "not a code",
  });
  t.is(unknown.status, 404);
  t.regex(unknown.text, /unknown or has expired/);
});

test("oauth - a denied request answers access_denied", async (t) => {
  const d = await startDevice();
  const page = await browser.answerDevice(String(d.json.verification_uri_complete), "deny");
  t.regex(page.text, /Request denied/);
  const r = await pollToEnd(String(d.json.device_code), 1);
  t.is(r.status, 400);
  t.is(r.json.error, "access_denied");
});

test("oauth - an unanswered device code ends expired_token", async (t) => {
  const d = await startDevice(shortLived.apiUrl);
  t.is(d.json.expires_in, 2);
  const r = await pollUntil(
    async () => {
      const p = await poll(String(d.json.device_code), shortLived.apiUrl);
      return p.json.error === "authorization_pending" || p.json.error === "slow_down" ? undefined : p;
    },
    { what: "expired_token", timeoutMs: 15_000, intervalMs: 1100 },
  );
  t.is(r.status, 400);
  t.is(r.json.error, "expired_token");
  // And the page no longer accepts its code.
  const form = await browser.get(String(d.json.verification_uri_complete));
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(form.text)![1];
  const lookup = await browser.post("/device", { csrf_token: csrf, user_code: String(d.json.user_code) });
  t.is(lookup.status, 404);
});

test("oauth - the verification page refuses a post without the session's CSRF token", async (t) => {
  const d = await startDevice();
  const r = await browser.post("/device", { user_code: String(d.json.user_code) });
  t.is(r.status, 403);
  const forged = await browser.post("/device/decision", {
    csrf_token: "x".repeat(43),
    user_code: String(d.json.user_code).replace("-", ""),
    decision: "approve",
  });
  t.is(forged.status, 403);
  t.is((await poll(String(d.json.device_code))).json.error, "authorization_pending");
  // Without a session the page sends the person to sign in first, keeping the code.
  const anonymous = await new Browser(c.baseUrl).request(
    "GET",
    `/device?user_code=${d.json.user_code}`,
    undefined,
    false,
  );
  t.is(anonymous.status, 303);
  t.is(
    anonymous.headers.get("location"),
    `/login?next=${encodeURIComponent(`/device?user_code=${d.json.user_code}`)}`,
  );
});

test("oauth - refresh rotates; reusing a rotated refresh token revokes the whole family", async (t) => {
  const first = await login();
  const r1 = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "refresh_token",
    refresh_token: first.refresh_token,
    client_id: CLIENT,
  });
  t.is(r1.status, 200, r1.text);
  t.not(r1.json.refresh_token, first.refresh_token);
  t.not(r1.json.access_token, first.access_token);
  const second = r1.json as { access_token: string; refresh_token: string };
  t.is((await mgmt("/me", second.access_token)).status, 200);

  // The first refresh token again: reuse. Every token of the login stops.
  const reuse = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "refresh_token",
    refresh_token: first.refresh_token,
    client_id: CLIENT,
  });
  t.is(reuse.status, 400);
  t.is(reuse.json.error, "invalid_grant");
  t.regex(String(reuse.json.error_description), /already used/);
  t.regex(assertDetailOnly(t, await mgmt("/me", second.access_token), 401), /revoked/);
  t.regex(assertDetailOnly(t, await mgmt("/me", first.access_token), 401), /revoked/);
  const stolen = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "refresh_token",
    refresh_token: second.refresh_token,
    client_id: CLIENT,
  });
  t.is(stolen.json.error, "invalid_grant");
  const events = await c.db.query(
    "SELECT payload FROM audit_events WHERE event_type = 'oauth.refresh_token_reused' AND tenant_id = ?",
    [c.tenantId],
  );
  t.true(events.length >= 1);
});

test("oauth - revoking a refresh token (RFC 7009) ends its access token too; unknown tokens answer 200", async (t) => {
  const tokens = await login();
  t.is((await mgmt("/me", tokens.access_token)).status, 200);
  const r = await postForm(c.baseUrl, "/oauth/revoke", { token: tokens.refresh_token, client_id: CLIENT });
  t.is(r.status, 200);
  t.regex(assertDetailOnly(t, await mgmt("/me", tokens.access_token), 401), /revoked/);
  const refresh = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "refresh_token",
    refresh_token: tokens.refresh_token,
    client_id: CLIENT,
  });
  t.is(refresh.json.error, "invalid_grant");
  t.is((await postForm(c.baseUrl, "/oauth/revoke", { token: "rco_nothing", client_id: CLIENT })).status, 200);
  const unsupported = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "password",
    client_id: CLIENT,
  });
  t.is(unsupported.json.error, "unsupported_grant_type");
  const json = await request(c, "/oauth/token", { key: null, body: { grant_type: DEVICE_GRANT } });
  t.is(json.status, 400);
  t.is(json.json.error, "invalid_request");
});

test("oauth - an access token works on the dashboard API with the user's identity", async (t) => {
  const { access_token } = await login();
  const me = await mgmt("/me", access_token);
  t.is(me.status, 200, me.text);
  t.is(me.json.type, "user");
  t.deepEqual(me.json.user, { id: owner.id, email: owner.email, role: "owner", can_exec: false });
  t.deepEqual(me.json.scopes, ["read", "deploy", "exec", "admin"], "the token's scopes");
  t.is(me.json.tenant_id, c.tenantId);
  const servers = await mgmt("/servers", access_token);
  t.is(servers.status, 200);
  t.true((servers.json.servers as { id: string }[]).some((s) => s.id === c.serverId));
  // As X-API-Key too, wherever an rck_ key goes.
  const asHeader = await request(c, "/api/servers", { key: null, headers: { "x-api-key": access_token } });
  t.is(asHeader.status, 200);
  // Managing automation keys is audited with the person as actor.
  const created = await mgmt("/automation-keys", access_token, { body: { name: "made-by-a-person" } });
  t.is(created.status, 201, created.text);
  const [ev] = await c.db.query(
    "SELECT key_id, payload FROM audit_events WHERE event_type = 'automation_key.created' AND tenant_id = ? ORDER BY seq DESC LIMIT 1",
    [c.tenantId],
  );
  const payload = typeof ev.payload === "string" ? JSON.parse(ev.payload) : ev.payload;
  t.like(payload.actor, { key_type: "user", user_id: owner.id, email: owner.email, role: "owner" });
});

test("oauth - an access token runs exec on the Automation API, audited with the user as actor", async (t) => {
  const { access_token } = await login();
  const r = await exec(c, { server_id: c.serverId, command: "echo out; echo err >&2; exit 3" }, access_token);
  assertCompleted(t, r, { exit_code: 3, stdout: "out\n", stderr: "err\n" });
  const opId = String(r.json.operation_id);
  t.regex(opId, UUID);
  const [row] = await c.db.query("SELECT key_id FROM operations WHERE id = ?", [opId]);
  t.is(row.key_id, owner.id);
  const audit = await mgmt(`/audit?operation_id=${opId}`, access_token);
  t.is(audit.status, 200, audit.text);
  const events = audit.json.events as {
    event_type: string;
    key_id: string;
    payload: Record<string, unknown>;
    created_at: string;
  }[];
  const started = events.find((e) => e.event_type === "operation.exec");
  t.truthy(started);
  t.is(started!.key_id, owner.id);
  t.like(started!.payload.actor as object, { key_type: "user", user_id: owner.id, email: owner.email });
  t.regex(started!.created_at, ISO_UTC);
  // The same validation as for a key: a bad body is 422 after authentication.
  const bad = await exec(c, { server_id: c.serverId, command: "true", timeout_seconds: 0 }, access_token);
  assertDetailOnly(t, bad, 422);
  // And no token or a refresh token is 401 with the contract's body.
  const { refresh_token } = await login();
  assertDetailOnly(t, await exec(c, { server_id: c.serverId, command: "true" }, refresh_token), 401);
  // External-deploy sessions are bound to an automation key: a person's token is not one.
  const session = await request(c, "/external-deploy/session", {
    key: access_token,
    body: { container_names: ["x"] },
  });
  t.regex(assertDetailOnly(t, session, 401), /rca_/);
});
