// The install link's `state` (install-state.ts) expires: past STATE_TTL_MS the
// setup URL refuses it before anything else is asked, so an old link cannot bind
// anything. The clock is the only thing moved; the state is relayctl's own,
// issued and checked on the SQLite store. (The refusals that need GitHub —
// forged, spent, wrong user, taken — run against the stand-in in
// test/github-app.test.ts.)
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { resolveAuditKeys, useAuditKeys } from "../audit/chain-key.js";
import { createTenant } from "../cli/admin.js";
import { migrate, openDb } from "../db/knex.js";
import { GitHubApp } from "./app-client.js";
import { STATE_TTL_MS, checkState, issueInstallLink } from "./install-state.js";

test("github - an install link's state expires after its lifetime and is refused then", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-gh-state-"));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  const db = openDb(url);
  const realNow = Date.now;
  t.teardown(async () => {
    Date.now = realNow;
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  await migrate(db);
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  const tenant = await createTenant(db, "gh-state");
  const privateKey = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({
    type: "pkcs1",
    format: "pem",
  }) as string;
  const app = await GitHubApp.create({
    appId: "12345",
    slug: "relayctl",
    privateKey,
    webhookSecret: "0123456789abcdef0123",
    clientId: "Iv1.0123456789abcdef",
    clientSecret: "0123456789abcdef0123456789abcdef01234567",
    // Nothing may be asked of GitHub for an expired state: an address that answers nothing.
    apiUrl: "http://127.0.0.1:9",
    webUrl: "https://github.com",
  });

  const link = await issueInstallLink(db, app, tenant.tenant_id, "00000000-0000-4000-8000-000000000001");
  // github.com's install page (GitHub Enterprise Server's /github-apps/ is in test/github-app.test.ts).
  t.true(link.url.startsWith("https://github.com/apps/relayctl/installations/new?state="), link.url);
  t.is(Date.parse(link.expires_at), Number(link.state.split(".")[1]));
  t.true(Date.parse(link.expires_at) - realNow() <= STATE_TTL_MS);

  t.like(await checkState(db, app, link.state), { tenantId: tenant.tenant_id });
  Date.now = () => realNow() + STATE_TTL_MS + 1000;
  const expired = await t.throwsAsync(checkState(db, app, link.state));
  t.like(expired, { code: "RC_ERR_GITHUB_STATE_INVALID" });
  t.regex(expired!.message, /expired or already used/);
  const row = await db("github_install_states")
    .where({ nonce: link.state.split(".")[0] })
    .first();
  t.is(row.used_at, null, "an expired state is not spent: it just no longer works");
  t.is(
    await db("github_installations")
      .count({ n: "*" })
      .first()
      .then((r) => Number(r?.n)),
    0,
  );
});
