// Issue 30's GitHub findings, against a running control plane (api and gateway
// processes, MariaDB, NATS) with GitHub's API played by the local stand-in
// (harness/github-api.ts) and deliveries signed with the App's webhook secret:
// - 1: an install link binds an installation only in its maker's signed-in
//   browser session, for the GitHub user who installed;
// - 2: the webhook's unverified bodies are bounded in number and per source IP,
//   and refused before being read when they cannot be signed;
// - 14: a captured signed body replayed under a new X-GitHub-Delivery does nothing.
import { createHmac, randomBytes, randomUUID } from "node:crypto";
import test from "ava";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type Dash, auditEvents, signInDash } from "./harness/dashboard-session";
import { type GitHubApiStandIn, startGitHubApi } from "./harness/github-api";
import { Browser, type Person, createOwner } from "./harness/people";

const SECRET = randomBytes(24).toString("hex");

let gh: GitHubApiStandIn;
let c: Cluster;
let alice: Person;
let bob: Person;
let aliceDash: Dash;

const sign = (body: Buffer | string) => `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;

async function deliver(event: string, body: string, opts: { id?: string; signature?: string } = {}) {
  const id = opts.id ?? randomUUID();
  const res = await fetch(`${c.baseUrl}/webhooks/github`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-github-event": event,
      "x-github-delivery": id,
      "x-hub-signature-256": opts.signature ?? sign(body),
    },
    body,
  });
  const text = await res.text();
  return { id, status: res.status, headers: res.headers, json: text ? JSON.parse(text) : {} };
}

/** GitHub's `installation` `created` delivery: `sender` is who installed. */
function installed(id: number, account: string, installer: string) {
  return deliver(
    "installation",
    JSON.stringify({
      action: "created",
      installation: { id, account: { login: account, type: "Organization" } },
      repositories: [],
      sender: { login: installer, id: gh.userId(installer), type: "User" },
    }),
  );
}

const setupPath = (state: string, code: string, installationId: number) =>
  `/github/setup?installation_id=${installationId}&state=${encodeURIComponent(state)}&code=${code}&setup_action=install`;

async function boundTo(installationId: number): Promise<string | null> {
  const rows = await c.db.query<{ tenant_id: string | null }>(
    "SELECT tenant_id FROM github_installations WHERE id = ?",
    [installationId],
  );
  return rows[0]?.tenant_id ?? null;
}

async function installLink(dash: Dash): Promise<string> {
  const r = await dash.call("POST", "/api/github/install-link");
  if (r.status !== 200) throw new Error(`install-link: ${r.status} ${r.text}`);
  return String(r.json.state);
}

test.before(async () => {
  gh = await startGitHubApi();
  c = await startCluster({
    serverEnv: {
      RELAYCTL_GITHUB_APP_ID: gh.appId,
      RELAYCTL_GITHUB_APP_SLUG: "relayctl-test",
      RELAYCTL_GITHUB_PRIVATE_KEY_FILE: gh.privateKeyFile,
      RELAYCTL_GITHUB_WEBHOOK_SECRET: SECRET,
      RELAYCTL_GITHUB_CLIENT_ID: gh.clientId,
      RELAYCTL_GITHUB_CLIENT_SECRET: gh.clientSecret,
      RELAYCTL_GITHUB_API_URL: gh.url,
      RELAYCTL_GITHUB_WEB_URL: gh.url,
      RELAYCTL_PUBLIC_URL: "https://relayctl.example",
    },
  });
  alice = await createOwner(c.db.url, c.tenantId);
  bob = await createOwner(c.db.url, c.tenantId);
  aliceDash = await signInDash(c.baseUrl, alice);
});
test.after.always(cleanupAll);

test.serial(
  "security - a GitHub install link binds only in its maker's signed-in session, for the GitHub user who installed",
  async (t) => {
    const VICTIM = 7001;
    gh.installations.set(VICTIM, {
      id: VICTIM,
      account: { login: "victim-org", type: "Organization" },
      created_at: new Date(Date.now() + 1000).toISOString(),
      repositories: [],
    });
    gh.users.set("victim-admin", [VICTIM]);
    gh.users.set("victim-member", [VICTIM]);
    t.is((await installed(VICTIM, "victim-org", "victim-admin")).status, 202);

    // A key has no person to bind the setup to.
    const apiKey = await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "gh-key"]);
    const byKey = await fetch(`${c.baseUrl}/api/github/install-link`, {
      method: "POST",
      headers: { "x-api-key": String(apiKey.key) },
    });
    t.is(byKey.status, 403);
    t.regex(((await byKey.json()) as { detail: string }).detail, /person who made it/);

    // Alice hands her link to the victim, who installs and comes back with no relayctl
    // session: led to sign in, nothing bound, the state not spent.
    const state = await installLink(aliceDash);
    const victim = new Browser(c.baseUrl);
    const noSession = await victim.request(
      "GET",
      setupPath(state, gh.issueCode("victim-admin"), VICTIM),
      undefined,
      false,
    );
    t.is(noSession.status, 303, noSession.text);
    t.regex(noSession.headers.get("location") ?? "", /^\/login\?next=%2Fgithub%2Fsetup%3F/);
    t.is(await boundTo(VICTIM), null, "nothing bound without a session");
    const spent = async (s: string) =>
      (await c.db.query("SELECT used_at FROM github_install_states WHERE nonce = ?", [s.split(".")[0]]))[0]
        ?.used_at;
    t.is(await spent(state), null, "leading to sign-in spends nothing");

    // The victim signed in as another relayctl person (even of the same tenant): refused.
    const bobBrowser = new Browser(c.baseUrl);
    t.is((await bobBrowser.signIn(bob)).status, 200);
    const other = await bobBrowser.get(setupPath(state, gh.issueCode("victim-admin"), VICTIM));
    t.is(other.status, 403, other.text);
    t.regex(JSON.parse(other.text).detail, /made by another relayctl person/);
    t.is(await boundTo(VICTIM), null, "nothing bound in another person's session");
    t.not(await spent(state), null, "the refusal spent the state");
    const late = await aliceDash.browser.get(setupPath(state, gh.issueCode("victim-admin"), VICTIM));
    t.is(late.status, 400, "not even its maker can use it after");

    // Alice's own session, with the code of a GitHub user who can access the
    // installation but did not install it (an organisation member): refused.
    const member = await aliceDash.browser.get(
      setupPath(await installLink(aliceDash), gh.issueCode("victim-member"), VICTIM),
    );
    t.is(member.status, 403, member.text);
    t.regex(
      JSON.parse(member.text).detail,
      /\(victim-member\) is not the one who installed \(victim-admin\)/,
    );
    t.is(await boundTo(VICTIM), null, "nothing bound for a user who did not install");

    // Alice installs on her own organisation and comes back in a browser not yet
    // signed in: she signs in first, and the setup then finishes.
    const MINE = 7002;
    gh.installations.set(MINE, {
      id: MINE,
      account: { login: "alice-org", type: "Organization" },
      created_at: new Date(Date.now() + 1000).toISOString(),
      repositories: [],
    });
    gh.users.set("alice-gh", [MINE]);
    t.is((await installed(MINE, "alice-org", "alice-gh")).status, 202);
    const fresh = new Browser(c.baseUrl);
    const done = await fresh.signIn(
      alice,
      setupPath(await installLink(aliceDash), gh.issueCode("alice-gh"), MINE),
    );
    t.is(done.status, 200, done.text);
    t.like(JSON.parse(done.text), { installation_id: MINE, tenant_id: c.tenantId, account: "alice-org" });
    t.is(await boundTo(MINE), c.tenantId);
    const bound = (await auditEvents(c, "github.installation_bound")).map((e) => e.payload);
    t.like(bound, [
      { installation_id: MINE, github_user: "alice-gh", actor: { key_type: "user", user_id: alice.id } },
    ]);
  },
);
