// Issue 30, findings 6 and 7, over real HTTP against a real control plane:
// - 6: accounts are per tenant. An invite to an address that has an account in
//   another tenant is answered like any other (no 409 probe), and accepting it
//   makes a new account in the inviting tenant that leaves the other one as it
//   was (no squatting); sign-in finds the account the password opens.
// - 7: failed sign-ins count per (account, source IP): a stranger's wrong
//   passwords do not lock the person out from their own address; a slower
//   global per-account limit stops spread-out guessing, yet never blocks the
//   right password from an address the account signed in from before.
import test from "ava";
import { assertError } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { request } from "./harness/http";
import { Browser, type Person, createOwner, deviceTokens, hiddenField } from "./harness/people";
import { pollUntil } from "./harness/wait";

let a: Cluster;
let b: Cluster;
let ownerTokenA: string;
let ownerTokenB: string;

test.before(async () => {
  // The api trusts its loopback "proxy": X-Forwarded-For gives each sign-in its source address.
  a = await startCluster({ serverEnv: { RELAYCTL_TRUSTED_PROXIES: "127.0.0.1" } });
  b = await a.addTenant();
  const tokenOf = async (c: Cluster) => {
    const owner = await createOwner(c.db.url, c.tenantId);
    const browser = new Browser(c.baseUrl);
    await browser.signIn(owner);
    return (await deviceTokens(c.baseUrl, browser)).access_token;
  };
  [ownerTokenA, ownerTokenB] = await Promise.all([tokenOf(a), tokenOf(b)]);
});
test.after.always(cleanupAll);

const uniqEmail = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 8)}@example.test`;

/** An invite of `email` by the owner holding `token`: the API's answer. */
const inviteAs = (c: Cluster, token: string, email: string) =>
  request(c, "/api/users/invites", { key: token, body: { email, role: "owner" } });

/** Invites `email` into the tenant and accepts the invite with `password`. */
async function join(c: Cluster, token: string, email: string, password: string): Promise<Person> {
  const r = await inviteAs(c, token, email);
  if (r.status !== 201) throw new Error(`invite: ${r.status} ${r.text}`);
  const accepted = await new Browser(c.baseUrl).post(new URL(String(r.json.invite_url)).pathname, {
    password,
  });
  if (accepted.status !== 201) throw new Error(`accept: ${accepted.status} ${accepted.text}`);
  const users = await request(c, "/api/users", { key: token });
  const id = (users.json.users as { id: string; email: string }[]).find((u) => u.email === email)!.id;
  return { email, password, id };
}

/** The tenant a signed-in browser's session belongs to. */
async function tenantOf(browser: Browser): Promise<string> {
  const me = await browser.get("/api/me");
  if (me.status !== 200) throw new Error(`/api/me: ${me.status} ${me.text}`);
  return String(JSON.parse(me.text).tenant_id);
}

async function tenantName(c: Cluster): Promise<string> {
  const rows = await c.db.query("SELECT name FROM tenants WHERE id = ?", [c.tenantId]);
  return String(rows[0].name);
}

test("finding 6 - an invite never reveals another tenant's people, and accepting it squats nothing", async (t) => {
  const email = uniqEmail("shared");
  const inB = await join(b, ownerTokenB, email, "the-b-password-1");
  const before = await b.db.query("SELECT * FROM users WHERE id = ?", [inB.id]);

  // Tenant A invites the address: answered as for an unused address (before: 409 "already exists").
  const fresh = await inviteAs(a, ownerTokenA, uniqEmail("fresh"));
  const probe = await inviteAs(a, ownerTokenA, email);
  t.is(probe.status, 201, probe.text);
  t.deepEqual(Object.keys(probe.json).sort(), Object.keys(fresh.json).sort());
  t.is(probe.json.email, email);

  // A accepts its own link (the squat): a new account in A; B's account is untouched.
  const accepted = await new Browser(a.baseUrl).post(new URL(String(probe.json.invite_url)).pathname, {
    password: "the-a-password-1",
  });
  t.is(accepted.status, 201, accepted.text);
  t.deepEqual(await b.db.query("SELECT * FROM users WHERE id = ?", [inB.id]), before);
  const listedA = (await request(a, "/api/users", { key: ownerTokenA })).json.users as { email: string }[];
  const listedB = (await request(b, "/api/users", { key: ownerTokenB })).json.users as { email: string }[];
  t.is(listedA.filter((u) => u.email === email).length, 1);
  t.is(listedB.filter((u) => u.email === email).length, 1);

  // Each password opens its own tenant's account, and only that one.
  const viaB = new Browser(b.baseUrl);
  t.is((await viaB.signIn(inB)).status, 200);
  t.is(await tenantOf(viaB), b.tenantId);
  const viaA = new Browser(a.baseUrl);
  t.is((await viaA.signIn({ email, password: "the-a-password-1" })).status, 200);
  t.is(await tenantOf(viaA), a.tenantId);

  // Within one tenant an address is still one account.
  assertError(
    t,
    await inviteAs(a, ownerTokenA, email),
    409,
    "a user of this tenant already has this e-mail address",
  );
});

test("finding 6 - one address and password in two tenants: sign-in asks which, naming only those", async (t) => {
  const email = uniqEmail("both");
  const password = "the-same-password-1";
  await join(a, ownerTokenA, email, password);
  await join(b, ownerTokenB, email, password);
  const browser = new Browser(a.baseUrl);
  const asked = await browser.signIn({ email, password });
  t.is(asked.status, 200);
  t.regex(asked.text, /more than one tenant: choose one/);
  t.false(browser.cookies.has("relayctl_session"));
  const offered = [...asked.text.matchAll(/<option value="([^"]*)">/g)].map((m) => m[1]).sort();
  t.deepEqual(offered, [await tenantName(a), await tenantName(b)].sort());
  const chosen = await browser.post("/login", {
    csrf_token: hiddenField(asked.text, "csrf_token"),
    next: "/account",
    email,
    tenant: await tenantName(b),
    password,
  });
  t.is(chosen.status, 200);
  t.is(await tenantOf(browser), b.tenantId);
});

/** One sign-in as it arrives through the trusted proxy from `ip` (X-Forwarded-For). */
async function signInFrom(ip: string, email: string, password: string) {
  const browser = new Browser(a.baseUrl);
  const form = await browser.get("/login");
  const res = await fetch(`${a.baseUrl}/login`, {
    method: "POST",
    redirect: "manual",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      cookie: `relayctl_login_csrf=${encodeURIComponent(browser.cookies.get("relayctl_login_csrf")!)}`,
      "x-forwarded-for": ip,
    },
    body: new URLSearchParams({
      csrf_token: hiddenField(form.text, "csrf_token"),
      next: "/account",
      email,
      password,
    }),
  });
  const text = await res.text();
  return {
    status: res.status,
    text,
    signedIn: res.headers.getSetCookie().some((c) => c.startsWith("relayctl_session=rcs_")),
  };
}

/** Waits (polling the clock) until the current fixed window of `windowS` seconds has `needMs` left. */
const windowRoom = (windowS: number, needMs: number) =>
  pollUntil(async () => (windowS * 1000 - (Date.now() % (windowS * 1000)) >= needMs ? true : undefined), {
    what: `${needMs} ms left in the current ${windowS} s window`,
    timeoutMs: needMs + 1000,
    intervalMs: 200,
  });

async function failures(userId: string) {
  const rows = await a.db.query(
    "SELECT COUNT(*) AS n FROM audit_events WHERE event_type = 'auth.signin_failed' AND key_id = ?",
    [userId],
  );
  return Number(rows[0].n);
}

test("finding 7 - a stranger's wrong passwords do not lock the person out from their own address", async (t) => {
  await windowRoom(900, 90_000);
  const person = await join(a, ownerTokenA, uniqEmail("locked"), "the-right-password-1");
  for (let i = 0; i < 10; i++)
    t.is((await signInFrom("198.51.100.7", person.email, "a-wrong-guess-123")).status, 401);
  t.is(await failures(person.id), 10);
  // The stranger's address is limited now, even with the right password...
  const stranger = await signInFrom("198.51.100.7", person.email, person.password);
  t.is(stranger.status, 429);
  t.false(stranger.signedIn);
  // ...the person's own address is not (before: 429 for everyone).
  const own = await signInFrom("198.51.100.8", person.email, person.password);
  t.is(own.status, 303, own.text);
  t.true(own.signedIn);
});

test("finding 7 - the global per-account limit stops spread-out guessing but not the person at a known address", async (t) => {
  // The global limit's window is an hour: 10 addresses x 10 guesses must land in one.
  await windowRoom(3600, 180_000);
  const person = await join(a, ownerTokenA, uniqEmail("spread"), "the-right-password-2");
  const known = "198.51.100.20";
  t.is((await signInFrom(known, person.email, person.password)).status, 303);
  for (let ip = 0; ip < 10; ip++) {
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => signInFrom(`192.0.2.${ip + 1}`, person.email, "a-wrong-guess-456")),
    );
    t.deepEqual(
      answers.map((r) => r.status),
      Array(10).fill(401),
    );
  }
  // Past 100 failures in the hour, a new address is refused even with the right password:
  // the same answer as a wrong one, so the refusal tells a guesser nothing.
  const right = await signInFrom("192.0.2.200", person.email, person.password);
  const wrong = await signInFrom("192.0.2.201", person.email, "a-wrong-guess-789");
  t.is(right.status, 429);
  t.false(right.signedIn);
  t.is(wrong.status, 429);
  // The person, from the address they signed in from before, gets in.
  const back = await signInFrom(known, person.email, person.password);
  t.is(back.status, 303, back.text);
  t.true(back.signedIn);
});
