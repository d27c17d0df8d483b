// The device flow driven by a third-party OAuth client library (openid-client,
// panva's certified client on oauth4webapi), not only by our own CLI: discovery
// from the RFC 8414 metadata, RFC 8628 device authorization and polling, refresh
// and RFC 7009 revocation, against the running control plane. The person approves
// through /login and /device over HTTP.
import test from "ava";
import { assertDetailOnly } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { request } from "./harness/http";
import { Browser, type Person, createOwner } from "./harness/people";

let c: Cluster;
let owner: Person;

test.before(async () => {
  c = await startCluster({ serverEnv: { RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: "1" } });
  owner = await createOwner(c.db.url, c.tenantId);
});
test.after.always(cleanupAll);

test("openid-client - discovery, device flow, refresh and revocation against relayctl", async (t) => {
  // ESM-only package: a dynamic import from this CommonJS test.
  const oidc = await import("openid-client");
  const config = await oidc.discovery(new URL(c.baseUrl), "relayctl-cli", undefined, oidc.None(), {
    algorithm: "oauth2",
    execute: [oidc.allowInsecureRequests], // plain http on loopback in the test
  });
  t.is(config.serverMetadata().device_authorization_endpoint, `${c.baseUrl}/oauth/device/code`);

  const device = await oidc.initiateDeviceAuthorization(config, {});
  t.regex(device.user_code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
  // The library polls (authorization_pending until the person answers) while the browser approves.
  const polling = oidc.pollDeviceAuthorizationGrant(config, device);
  const browser = new Browser(c.baseUrl);
  await browser.signIn(owner, `/device?user_code=${device.user_code}`);
  const page = await browser.answerDevice(device.verification_uri_complete!, "approve");
  t.regex(page.text, /Device approved/);
  const tokens = await polling;
  t.regex(tokens.access_token, /^rco_/);
  t.regex(String(tokens.refresh_token), /^rcr_/);
  t.is(tokens.token_type.toLowerCase(), "bearer");
  t.is(tokens.expires_in, 900);

  const me = await request(c, "/api/me", { key: tokens.access_token });
  t.is(me.status, 200, me.text);
  t.like(me.json.user as object, { email: owner.email, role: "owner" });

  const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
  t.not(refreshed.refresh_token, tokens.refresh_token);
  t.is((await request(c, "/api/me", { key: refreshed.access_token })).status, 200);
  // The library surfaces our RFC 6749 §5.2 error for a reused refresh token.
  const reuse = await t.throwsAsync(oidc.refreshTokenGrant(config, tokens.refresh_token!));
  t.is((reuse as unknown as { error?: string }).error, "invalid_grant");

  // A fresh login to revoke through the library.
  const d2 = await oidc.initiateDeviceAuthorization(config, {});
  const polling2 = oidc.pollDeviceAuthorizationGrant(config, d2);
  await browser.answerDevice(d2.verification_uri_complete!, "approve");
  const t2 = await polling2;
  await oidc.tokenRevocation(config, t2.refresh_token!, { token_type_hint: "refresh_token" });
  assertDetailOnly(t, await request(c, "/api/me", { key: t2.access_token }), 401);
});

test("openid-client - a denied request rejects the poll with access_denied", async (t) => {
  const oidc = await import("openid-client");
  const config = await oidc.discovery(new URL(c.baseUrl), "relayctl-cli", undefined, oidc.None(), {
    algorithm: "oauth2",
    execute: [oidc.allowInsecureRequests],
  });
  const device = await oidc.initiateDeviceAuthorization(config, {});
  const polling = oidc.pollDeviceAuthorizationGrant(config, device);
  const browser = new Browser(c.baseUrl);
  await browser.signIn(owner);
  await browser.answerDevice(device.verification_uri_complete!, "deny");
  const err = await t.throwsAsync(polling);
  t.is((err as unknown as { error?: string }).error, "access_denied");
});
