// The OAuth authorization code grant with PKCE and dynamic client registration
// (RFC 6749 §4.1, RFC 7636, RFC 7591), the way MCP clients sign in: the MCP
// SDK's own client discovers relayctl's authorization server from /mcp's 401,
// registers itself and sends the person to /oauth/authorize; the person signs in
// and approves as a browser over HTTP (cookies, the pages' CSRF tokens); the SDK
// redeems the code and calls tools. Then the grant's refusals over plain HTTP.
import { createHash, randomBytes } from "node:crypto";
import {
  Client,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  StreamableHTTPClientTransport,
  UnauthorizedError,
} from "@modelcontextprotocol/client";
import test from "ava";
import { assertDetailOnly } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { request } from "./harness/http";
import { Browser, type Page, type Person, createOwner, postForm } from "./harness/people";

/** A loopback address nobody listens on: the code is read from the redirect, never delivered. */
const REDIRECT = "http://127.0.0.1:9/callback";
let c: Cluster;
let owner: Person;
let browser: Browser;

test.before(async () => {
  c = await startCluster();
  owner = await createOwner(c.db.url, c.tenantId);
  browser = new Browser(c.baseUrl);
  const signed = await browser.signIn(owner);
  if (!signed.text.includes(owner.email)) throw new Error(`sign-in failed: ${signed.status} ${signed.text}`);
});
test.after.always(cleanupAll);

/** Every hidden input of a page, as a form. */
function hiddenFields(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g))
    out[m[1]] = m[2]
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, "<")
      .replace(/&gt;/g, ">")
      .replace(/&amp;/g, "&");
  return out;
}

/** On the consent page: posts the decision and returns the (unfollowed) redirect to the client. */
async function decide(b: Browser, consent: Page, decision: "approve" | "deny"): Promise<URL> {
  if (consent.status !== 200 || !consent.text.includes("Allow access?"))
    throw new Error(`no consent page: ${consent.status} ${consent.text.slice(0, 500)}`);
  const r = await b.request("POST", "/oauth/authorize", { ...hiddenFields(consent.text), decision }, false);
  const location = r.headers.get("location");
  if (r.status !== 303 || !location) throw new Error(`consent post: ${r.status} ${r.text.slice(0, 500)}`);
  return new URL(location);
}

/** An MCP client's OAuth state, kept in memory as a real client keeps it on disk. */
class MemoryProvider implements OAuthClientProvider {
  info?: { client_id: string };
  stored?: { access_token: string; token_type: string; refresh_token?: string };
  verifier = "";
  discovery?: OAuthDiscoveryState;
  sentTo?: URL;
  readonly expectedState = randomBytes(16).toString("base64url");

  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return {
      client_name: "SDK test client",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  state() {
    return this.expectedState;
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: { client_id: string }) {
    this.info = info;
  }
  tokens() {
    return this.stored;
  }
  saveTokens(tokens: { access_token: string; token_type: string; refresh_token?: string }) {
    this.stored = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.sentTo = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  // Lets the SDK check the callback came from the authorization server it sent the person to.
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

test.serial(
  "oauth code - the MCP SDK client registers, the person signs in and approves, tools work",
  async (t) => {
    const provider = new MemoryProvider();
    const mcpUrl = new URL(`${c.baseUrl}/mcp`);
    const first = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
    await t.throwsAsync(new Client({ name: "relayctl-test", version: "1.0.0" }).connect(first), {
      instanceOf: UnauthorizedError,
    });
    t.truthy(provider.info?.client_id, "the SDK registered itself");
    const authUrl = provider.sentTo;
    if (!authUrl) throw new Error("the SDK did not send the person anywhere");
    t.is(`${authUrl.origin}${authUrl.pathname}`, `${c.baseUrl}/oauth/authorize`);
    t.is(authUrl.searchParams.get("code_challenge_method"), "S256");

    // A browser with no session: sign-in first, then back to the consent page.
    const person = new Browser(c.baseUrl);
    const consent = await person.signIn(owner, authUrl.pathname + authUrl.search);
    t.regex(consent.text, /SDK test client/);
    const back = await decide(person, consent, "approve");
    t.is(`${back.origin}${back.pathname}`, REDIRECT);
    t.is(back.searchParams.get("state"), provider.expectedState);
    t.is(back.searchParams.get("iss"), c.baseUrl);
    t.regex(back.searchParams.get("code") ?? "", /^rac_/);

    await first.finishAuth(back.searchParams);
    t.regex(provider.stored?.access_token ?? "", /^rco_/);
    const client = new Client({ name: "relayctl-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
    const tools = (await client.listTools()).tools.map((x) => x.name);
    t.true(tools.includes("list_servers"));
    const r = await client.callTool({ name: "list_servers", arguments: {} });
    t.falsy(r.isError, JSON.stringify(r.content));
    t.true(JSON.stringify(r.structuredContent).includes(c.serverId));
    await client.close();

    // The sign-in is audited with the person as actor and the client named.
    const audit = await request(c, "/api/audit?limit=1000", { key: provider.stored?.access_token });
    const types = JSON.stringify(audit.json);
    t.regex(types, /oauth\.authorization_approved/);
    t.regex(types, /oauth\.tokens_issued/);
  },
);

// ---- the grant over plain HTTP ----

async function register(redirectUris: string[] = [REDIRECT]) {
  const res = await fetch(`${c.baseUrl}/oauth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: "direct test",
      redirect_uris: redirectUris,
      token_endpoint_auth_method: "none",
    }),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

function pkce() {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

function authorizePath(clientId: string, extra: Record<string, string> = {}) {
  const q = new URLSearchParams({
    response_type: "code",
    client_id: clientId,
    redirect_uri: REDIRECT,
    state: "st-1",
    code_challenge_method: "S256",
    ...extra,
  });
  return `/oauth/authorize?${q}`;
}

/** Registers a client and gets a code for the signed-in browser. */
async function code() {
  const client = String((await register()).json.client_id);
  const p = pkce();
  const back = await decide(
    browser,
    await browser.get(authorizePath(client, { code_challenge: p.challenge })),
    "approve",
  );
  return { client, ...p, code: String(back.searchParams.get("code")) };
}

const redeem = (g: { client: string; code: string; verifier: string }, redirectUri = REDIRECT) =>
  postForm(c.baseUrl, "/oauth/token", {
    grant_type: "authorization_code",
    code: g.code,
    redirect_uri: redirectUri,
    client_id: g.client,
    code_verifier: g.verifier,
  });

test("oauth code - metadata names the authorization and registration endpoints, S256 only", async (t) => {
  const r = await request(c, "/.well-known/oauth-authorization-server", { key: null });
  t.like(r.json, {
    authorization_endpoint: `${c.baseUrl}/oauth/authorize`,
    registration_endpoint: `${c.baseUrl}/oauth/register`,
    code_challenge_methods_supported: ["S256"],
    response_types_supported: ["code"],
  });
  t.true((r.json.grant_types_supported as string[]).includes("authorization_code"));
});

test("oauth code - registration takes loopback http and https redirect URIs, nothing else", async (t) => {
  const ok = await register(["http://localhost:33418/cb", "https://app.example/cb"]);
  t.is(ok.status, 201);
  t.is(ok.json.token_endpoint_auth_method, "none");
  for (const bad of ["http://evil.example/cb", "javascript:alert(1)", "https://app.example/cb#x"]) {
    const r = await register([bad]);
    t.is(r.status, 400, bad);
    t.is(r.json.error, "invalid_redirect_uri", bad);
  }
});

test("oauth code - a code works once with its verifier; refresh works for the client", async (t) => {
  const g = await code();
  const wrong = await redeem({ ...g, verifier: pkce().verifier });
  t.is(wrong.status, 400);
  t.is(wrong.json.error, "invalid_grant");
  t.regex(String(wrong.json.error_description), /PKCE/);
  const r = await redeem(g);
  t.is(r.status, 200, r.text);
  t.is((await request(c, "/api/me", { key: String(r.json.access_token) })).status, 200);
  const refreshed = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "refresh_token",
    refresh_token: String(r.json.refresh_token),
    client_id: g.client,
  });
  t.is(refreshed.status, 200, refreshed.text);
  t.is((await request(c, "/api/me", { key: String(refreshed.json.access_token) })).status, 200);
  // It registered for redirects: it may not start a device flow.
  const device = await postForm(c.baseUrl, "/oauth/device/code", { client_id: g.client });
  t.is(device.json.error, "unauthorized_client");
});

test("oauth code - a reused code is refused and the tokens of its first use are revoked", async (t) => {
  const g = await code();
  const first = await redeem(g);
  t.is(first.status, 200, first.text);
  const again = await redeem(g);
  t.is(again.status, 400);
  t.is(again.json.error, "invalid_grant");
  t.regex(
    assertDetailOnly(t, await request(c, "/api/me", { key: String(first.json.access_token) }), 401),
    /revoked/,
  );
  const refresh = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "refresh_token",
    refresh_token: String(first.json.refresh_token),
    client_id: g.client,
  });
  t.is(refresh.json.error, "invalid_grant");
});

test("oauth code - an unregistered redirect_uri or client is an error page, never a redirect", async (t) => {
  const client = String((await register()).json.client_id);
  const { challenge } = pkce();
  const elsewhere = await browser.request(
    "GET",
    authorizePath(client, { code_challenge: challenge, redirect_uri: "http://127.0.0.1:9/other" }),
    undefined,
    false,
  );
  t.is(elsewhere.status, 400);
  t.is(elsewhere.headers.get("location"), null);
  t.regex(elsewhere.text, /redirect_uri/);
  const unknown = await browser.request(
    "GET",
    authorizePath("mcp-nobody", { code_challenge: challenge }),
    undefined,
    false,
  );
  t.is(unknown.status, 400);
  t.is(unknown.headers.get("location"), null);
});

// Every client with a redirect URI registered itself: before the person consented, an error is
// shown, never redirected to it (RFC 9700 §4.11.2; test/security-edge.test.ts has the open redirect).
test("oauth code - plain PKCE or none at all is refused on a page, not redirected to the client", async (t) => {
  const client = String((await register()).json.client_id);
  const { verifier } = pkce();
  const cases: Record<string, string>[] = [
    { code_challenge: verifier, code_challenge_method: "plain" },
    { code_challenge_method: "S256" },
  ];
  for (const extra of cases) {
    const r = await browser.request("GET", authorizePath(client, extra), undefined, false);
    t.is(r.status, 400);
    t.is(r.headers.get("location"), null);
    t.regex(r.text, /invalid_request/);
    t.regex(r.text, /code_challenge/);
  }
});

test("oauth code - deny sends access_denied and no code", async (t) => {
  const client = String((await register()).json.client_id);
  const back = await decide(
    browser,
    await browser.get(authorizePath(client, { code_challenge: pkce().challenge })),
    "deny",
  );
  t.is(back.searchParams.get("error"), "access_denied");
  t.is(back.searchParams.get("state"), "st-1");
  t.is(back.searchParams.get("code"), null);
});

test("oauth code - the consent post needs the session's CSRF token", async (t) => {
  const client = String((await register()).json.client_id);
  const consent = await browser.get(authorizePath(client, { code_challenge: pkce().challenge }));
  const forged = await browser.request(
    "POST",
    "/oauth/authorize",
    { ...hiddenFields(consent.text), csrf_token: "forged", decision: "approve" },
    false,
  );
  t.is(forged.status, 403);
  t.is(forged.headers.get("location"), null);
});

test("oauth code - many approvals at once all get their codes (no deadlock in housekeeping)", async (t) => {
  // The consent pages first, then every decision posted at the same moment: the
  // clean-up of old codes once ran inside each approval's transaction and two
  // concurrent approvals deadlocked on its range locks (a 500 to one of them).
  const client = String((await register()).json.client_id);
  const pages = await Promise.all(
    Array.from({ length: 8 }, () => browser.get(authorizePath(client, { code_challenge: pkce().challenge }))),
  );
  const backs = await Promise.all(pages.map((p) => decide(browser, p, "approve")));
  const codes = new Set(backs.map((b) => b.searchParams.get("code")));
  t.is(codes.size, 8);
  for (const code of codes) t.regex(code ?? "", /^rac_/);
});
