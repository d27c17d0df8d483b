// People and the device flow on the SQLite store of `make dev`: the first owner,
// sign-in, the device flow with slow_down (the interval bump is raw SQL), refresh
// rotation and reuse detection, the token on the dashboard API.
import { join } from "node:path";
import test from "ava";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { startControlPlane } from "./harness/control-plane";
import { request } from "./harness/http";
import { Browser, createOwner, postForm } from "./harness/people";

test.after.always(cleanupAll);

test("sqlite - device flow, refresh rotation and reuse detection work on SQLite", async (t) => {
  const dir = makeTempDir("oauth-sqlite");
  const databaseUrl = `sqlite://${join(dir, "dev.db")}`;
  const server = await startControlPlane({
    role: "all",
    bus: "memory",
    databaseUrl,
    dir,
    env: { RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: "1" },
  });
  t.teardown(() => server.stop());
  await server.admin(["create-tenant", "--name", "dev"]);
  const owner = await createOwner(databaseUrl, "dev");
  const base = server.apiUrl;
  const d = await postForm(base, "/oauth/device/code", { client_id: "relayctl-cli" });
  const poll = () =>
    postForm(base, "/oauth/token", {
      grant_type: "urn:ietf:params:oauth:grant-type:device_code",
      device_code: String(d.json.device_code),
      client_id: "relayctl-cli",
    });
  t.is((await poll()).json.error, "authorization_pending");
  t.is((await poll()).json.error, "slow_down");
  const browser = new Browser(base);
  await browser.signIn(owner);
  await browser.answerDevice(String(d.json.verification_uri_complete), "approve");
  const tokens = await poll();
  t.is(tokens.status, 200, tokens.text);
  const me = await request({ baseUrl: base }, "/api/me", { key: String(tokens.json.access_token) });
  t.like(me.json, { type: "user", user: { email: owner.email, role: "owner" } });
  const refresh = (token: unknown) =>
    postForm(base, "/oauth/token", {
      grant_type: "refresh_token",
      refresh_token: String(token),
      client_id: "relayctl-cli",
    });
  const rotated = await refresh(tokens.json.refresh_token);
  t.is(rotated.status, 200, rotated.text);
  t.is((await refresh(tokens.json.refresh_token)).json.error, "invalid_grant");
  t.is((await request({ baseUrl: base }, "/api/me", { key: String(rotated.json.access_token) })).status, 401);
});
