// People's accounts over HTTP: the operator's first owner, /login with its CSRF
// token and attempt limits, the session cookie's attributes, sign-out ending the
// session at once, invites (single use), the member role, and disabling a user —
// with every sign-in, failure and sign-out in the audit trail.
import { randomUUID } from "node:crypto";
import test from "ava";
import { assertDetailOnly, assertError } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec, request } from "./harness/http";
import { Browser, type Person, createOwner, deviceTokens, hiddenField, postForm } from "./harness/people";
import { pollUntil, waitForMinuteRoom } from "./harness/wait";

let c: Cluster;
let owner: Person;
let ownerToken: string;

test.before(async () => {
  // The api trusts its loopback "proxy", so X-Forwarded-Proto: https reads as an HTTPS request.
  c = await startCluster({ serverEnv: { RELAYCTL_TRUSTED_PROXIES: "127.0.0.1" } });
  owner = await createOwner(c.db.url, c.tenantId);
  const b = new Browser(c.baseUrl);
  await b.signIn(owner);
  ownerToken = (await deviceTokens(c.baseUrl, b)).access_token;
});
test.after.always(cleanupAll);

async function events(type: string, userId: string) {
  const rows = await c.db.query(
    "SELECT payload FROM audit_events WHERE tenant_id = ? AND event_type = ? AND key_id = ? ORDER BY seq",
    [c.tenantId, type, userId],
  );
  return rows.map((r) => (typeof r.payload === "string" ? JSON.parse(r.payload) : r.payload));
}

/** Invites a person with `role` through the API and accepts the invite on its page. */
async function invite(role: "owner" | "deployer" | "viewer" | "member"): Promise<Person> {
  const email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.test`;
  const r = await request(c, "/api/users/invites", { key: ownerToken, body: { email, role } });
  if (r.status !== 201) throw new Error(`invite: ${r.status} ${r.text}`);
  const path = new URL(String(r.json.invite_url)).pathname;
  const password = `pw-${Math.random().toString(36).slice(2)}-long`;
  const b = new Browser(c.baseUrl);
  const accepted = await b.post(path, { password });
  if (accepted.status !== 201) throw new Error(`accept: ${accepted.status} ${accepted.text}`);
  const users = await request(c, "/api/users", { key: ownerToken });
  const id = (users.json.users as { id: string; email: string }[]).find((u) => u.email === email)!.id;
  return { email, password, id };
}

test("accounts - a sign-in sets an HttpOnly SameSite session cookie, Secure over HTTPS, and is audited", async (t) => {
  const b = new Browser(c.baseUrl);
  const form = await b.get("/login");
  const res = await fetch(`${c.baseUrl}/login`, {
    method: "POST",
    redirect: "manual",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      cookie: `relayctl_login_csrf=${encodeURIComponent(b.cookies.get("relayctl_login_csrf")!)}`,
      "x-forwarded-proto": "https",
    },
    body: new URLSearchParams({
      csrf_token: hiddenField(form.text, "csrf_token"),
      next: "/account",
      email: owner.email,
      password: owner.password,
    }),
  });
  t.is(res.status, 303);
  t.is(res.headers.get("location"), "/account");
  const session = res.headers.getSetCookie().find((s) => s.startsWith("relayctl_session="))!;
  t.regex(session, /; HttpOnly/);
  t.regex(session, /; SameSite=Lax/);
  t.regex(session, /; Secure/);
  // Over plain http (dev) the cookie cannot be Secure, or the browser would drop it.
  const plain = new Browser(c.baseUrl);
  const page = await plain.signIn(owner);
  t.is(page.status, 200);
  t.true(page.text.includes(owner.email));
  const signins = await events("auth.signin", owner.id);
  t.true(signins.length >= 2);
  t.like(signins.at(-1).actor, { key_type: "user", user_id: owner.id, email: owner.email });
});

test("accounts - a login post without its CSRF token, or with a wrong password, is refused", async (t) => {
  const b = new Browser(c.baseUrl);
  await b.get("/login");
  const noCsrf = await b.post("/login", { email: owner.email, password: owner.password, next: "/account" });
  t.is(noCsrf.status, 403);
  t.false(b.cookies.has("relayctl_session"));
  const wrong = await b.signIn({ email: owner.email, password: "not-the-password" });
  t.is(wrong.status, 401);
  t.regex(wrong.text, /Wrong e-mail or password/);
  const unknown = await b.signIn({ email: "nobody@example.test", password: "whatever-password" });
  t.is(unknown.status, 401);
  t.regex(unknown.text, /Wrong e-mail or password/);
  const failures = await events("auth.signin_failed", owner.id);
  t.true(failures.some((f: { reason: string }) => f.reason === "password"));
});

test("accounts - sign-in attempts are limited per account, even with the right password after", async (t) => {
  const victim = await invite("member");
  const b = new Browser(c.baseUrl);
  // The limit is per fixed 900 s window: 11 attempts straddling its end would start afresh.
  await windowRoom(900, 90_000);
  for (let i = 0; i < 10; i++)
    t.is((await b.signIn({ email: victim.email, password: "guess-number-x" })).status, 401);
  const limited = await b.signIn(victim);
  t.is(limited.status, 429);
  t.regex(limited.text, /Too many sign-in attempts/);
  t.false(b.cookies.has("relayctl_session"));
  t.is((await events("auth.signin_limited", victim.id)).length, 1);
});

test("accounts - sign-out ends the session at once and is audited; it needs the CSRF token", async (t) => {
  const b = new Browser(c.baseUrl);
  const account = await b.signIn(owner);
  const forged = await b.post("/logout", {});
  t.is(forged.status, 403);
  t.is((await b.get("/account")).status, 200);
  const out = await b.post("/logout", { csrf_token: hiddenField(account.text, "csrf_token") });
  t.regex(out.url, /\/login$/);
  const after = await b.request("GET", "/account", undefined, false);
  t.is(after.status, 303);
  t.is(after.headers.get("location"), "/login?next=/account");
  t.true((await events("auth.signout", owner.id)).length >= 1);
});

test("accounts - the login page never redirects off the site", async (t) => {
  const b = new Browser(c.baseUrl);
  const page = await b.get("/login?next=//evil.example/x");
  t.is(hiddenField(page.text, "next"), "/account");
});

test("accounts - an invite is single use; a member (now a deployer) may read but not exec or manage credentials", async (t) => {
  const member = await invite("member");
  const b = new Browser(c.baseUrl);
  t.is((await b.signIn(member)).status, 200);
  const { access_token } = await deviceTokens(c.baseUrl, b);
  const me = await request(c, "/api/me", { key: access_token });
  t.like(me.json.user as object, { email: member.email, role: "deployer" });
  t.is((await request(c, "/api/servers", { key: access_token })).status, 200);
  // exec reads the servers' secrets: an owner's, or a person's with the exec grant (issue 30, finding 9).
  assertError(
    t,
    await exec(c, { server_id: c.serverId, command: "true" }, access_token),
    403,
    "POST /api/automation/v1/exec needs the owner role or the exec grant; you are a deployer",
  );
  assertError(
    t,
    await request(c, "/api/automation-keys", { key: access_token, body: { name: "nope" } }),
    403,
    "POST /api/automation-keys needs the owner role; you are a deployer",
  );
  t.is(
    (await request(c, "/api/users/invites", { key: access_token, body: { email: "x@example.test" } })).status,
    403,
  );

  // The invite link again: gone.
  const again = await request(c, "/api/users/invites", {
    key: ownerToken,
    body: { email: "second@example.test" },
  });
  const path = new URL(String(again.json.invite_url)).pathname;
  t.is((await new Browser(c.baseUrl).post(path, { password: "a-long-password-1" })).status, 201);
  t.is((await new Browser(c.baseUrl).post(path, { password: "a-long-password-2" })).status, 404);
});

test("accounts - disabling a user ends their sessions and tokens at once", async (t) => {
  const member = await invite("member");
  const b = new Browser(c.baseUrl);
  await b.signIn(member);
  const { access_token } = await deviceTokens(c.baseUrl, b);
  t.is((await request(c, "/api/me", { key: access_token })).status, 200);
  const del = await request(c, `/api/users/${member.id}`, { key: ownerToken, method: "DELETE" });
  t.is(del.status, 204);
  assertError(
    t,
    await request(c, "/api/me", { key: access_token }),
    401,
    "OAuth access token has been revoked: log in again",
  );
  t.is((await b.request("GET", "/account", undefined, false)).status, 303);
  t.is((await new Browser(c.baseUrl).signIn(member)).status, 401);
});

/** Waits (polling the clock) until the current fixed window of `windowS` seconds has `needMs` left. */
const windowRoom = (windowS: number, needMs: number) =>
  pollUntil(async () => (windowS * 1000 - (Date.now() % (windowS * 1000)) >= needMs ? true : undefined), {
    what: `${needMs} ms left in the current ${windowS} s window`,
    timeoutMs: needMs + 1000,
    intervalMs: 200,
  });

/** One sign-in as it arrives through the trusted proxy from `ip` (X-Forwarded-For). */
async function signInFrom(ip: string, email: string, password: string) {
  const b = new Browser(c.baseUrl);
  const form = await b.get("/login");
  const res = await fetch(`${c.baseUrl}/login`, {
    method: "POST",
    redirect: "manual",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      cookie: `relayctl_login_csrf=${encodeURIComponent(b.cookies.get("relayctl_login_csrf")!)}`,
      "x-forwarded-for": ip,
    },
    body: new URLSearchParams({
      csrf_token: hiddenField(form.text, "csrf_token"),
      next: "/account",
      email,
      password,
    }),
  });
  await res.arrayBuffer();
  return res;
}

test("accounts - sign-in attempts are limited per IP across accounts; another address is not", async (t) => {
  await windowRoom(900, 90_000);
  const sprayer = "203.0.113.50";
  // 50 guesses from one address, each at another (unknown) account: no per-account limit trips.
  for (let batch = 0; batch < 5; batch++) {
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        signInFrom(sprayer, `sprayed-${batch}-${i}@example.test`, "a-guessed-password"),
      ),
    );
    t.deepEqual(
      answers.map((r) => r.status),
      Array(10).fill(401),
    );
  }
  // The 51st from that address is refused before the password is looked at, even the right one.
  const limited = await signInFrom(sprayer, owner.email, owner.password);
  t.is(limited.status, 429);
  t.false(limited.headers.getSetCookie().some((x) => x.startsWith("relayctl_session=")));
  const retry = Number(limited.headers.get("retry-after"));
  t.true(Number.isInteger(retry) && retry >= 1 && retry <= 900, `Retry-After ${retry}`);
  const audited = await events("auth.signin_limited", owner.id);
  t.true(audited.some((e: { ip: string }) => e.ip === sprayer));
  // The same person from another address signs in.
  const elsewhere = await signInFrom("203.0.113.51", owner.email, owner.password);
  t.is(elsewhere.status, 303);
  t.true(elsewhere.headers.getSetCookie().some((x) => x.startsWith("relayctl_session=rcs_")));
});

test("accounts - an invite link expires: after expires_at its page and its post answer 404", async (t) => {
  const email = `late-${Math.random().toString(36).slice(2, 8)}@example.test`;
  const r = await request(c, "/api/users/invites", { key: ownerToken, body: { email, role: "member" } });
  t.is(r.status, 201, r.text);
  const expires = Date.parse(String(r.json.expires_at));
  const week = 7 * 24 * 3600 * 1000;
  t.true(expires > Date.now() + week - 300_000 && expires <= Date.now() + week, String(r.json.expires_at));
  const path = new URL(String(r.json.invite_url)).pathname;
  t.is((await new Browser(c.baseUrl).get(path)).status, 200);
  // A week on, without waiting a week: the stored deadline is moved into the past.
  await c.db.query("UPDATE user_invites SET expires_at = ? WHERE email = ?", [Date.now() - 1, email]);
  const page = await new Browser(c.baseUrl).get(path);
  t.is(page.status, 404);
  t.regex(page.text, /unknown, used or expired/);
  t.is((await new Browser(c.baseUrl).post(path, { password: "a-long-password-late" })).status, 404);
  const users = await request(c, "/api/users", { key: ownerToken });
  t.false((users.json.users as { email: string }[]).some((u) => u.email === email));
});

test("accounts - codes typed on /device are limited per person: after 10 wrong ones even the right one is refused", async (t) => {
  const member = await invite("member");
  const b = new Browser(c.baseUrl);
  t.is((await b.signIn(member)).status, 200);
  await windowRoom(900, 90_000);
  const d = await postForm(c.baseUrl, "/oauth/device/code", { client_id: "relayctl-cli" });
  const csrf = hiddenField((await b.get("/device")).text, "csrf_token");
  for (let i = 0; i < 10; i++) {
    const wrong = await b.post("/device", { csrf_token: csrf, user_code: "BBBB-BBBB" });
    t.is(wrong.status, 404);
  }
  const limited = await b.post("/device", { csrf_token: csrf, user_code: String(d.json.user_code) });
  t.is(limited.status, 429);
  t.regex(limited.text, /Too many codes tried/);
  t.truthy(limited.headers.get("retry-after"));
  const decision = await b.post("/device/decision", {
    csrf_token: csrf,
    user_code: String(d.json.user_code),
    decision: "approve",
  });
  t.is(decision.status, 429);
  // Nothing was approved: the device still waits.
  const poll = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "urn:ietf:params:oauth:grant-type:device_code",
    device_code: String(d.json.device_code),
    client_id: "relayctl-cli",
  });
  t.is(poll.json.error, "authorization_pending");
  // Another person (same address) still approves devices.
  const ob = new Browser(c.baseUrl);
  await ob.signIn(owner);
  t.regex((await deviceTokens(c.baseUrl, ob)).access_token, /^rco_/);
});

test("accounts - a person's token has an automation key's default limit on the Automation API, audited as theirs", async (t) => {
  const member = await invite("member");
  const b = new Browser(c.baseUrl);
  await b.signIn(member);
  const { access_token } = await deviceTokens(c.baseUrl, b);
  await waitForMinuteRoom(30_000);
  const answers = await Promise.all(
    Array.from({ length: 110 }, () =>
      request(c, `/api/automation/v1/operations/${randomUUID()}`, { key: access_token }),
    ),
  );
  t.is(answers.filter((r) => r.status === 404).length, 100, answers.map((r) => r.status).join(","));
  const limited = answers.filter((r) => r.status === 429);
  t.is(limited.length, 10);
  t.regex(assertDetailOnly(t, limited[0], 429), /rate limit exceeded: 100 requests per minute/);
  t.truthy(limited[0].headers.get("retry-after"));
  const hits = await events("rate_limit.hit", member.id);
  t.is(hits.length, 1);
  t.like(hits[0], { limit: 100, window_seconds: 60, actor: { user_id: member.id, email: member.email } });
});
