// Binding an installation to a tenant. Nothing in a webhook says whose an
// installation is, so a tenant asks relayctl for an install link carrying a
// `state` = nonce.expiry.HMAC(nonce, tenant, expiry), keyed by a key derived
// from the App's private key (never stored). GitHub sends the user back to the
// setup URL with installation_id, that state and (the App requests user
// authorization during installation) an OAuth `code`; relayctl checks the
// HMAC, spends the nonce (a conditional UPDATE: single use, even with several
// api instances), exchanges the code for the user's token and binds only an
// installation that user can access (GET /user/installations), to the tenant
// the state was issued to. The installation_id parameter alone proves nothing:
// knowing (or racing for) someone else's id does not get it, since the
// attacker's own code does not list it. Kept as defence in depth: an
// installation created before the state was issued is refused unless already
// this tenant's, because /user/installations also lists installations where
// the user merely has read access to one repository (an org member who is not
// its owner); such a member can then claim at most an installation made during
// their own link's lifetime. One bound to another tenant is refused (409).
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import type { GitHubApp } from "./app-client.js";
import { adoptDeliveries } from "./deliveries.js";
import { upsertInstallation } from "./installations.js";

/** How long an install link is good for. */
export const STATE_TTL_MS = 15 * 60 * 1000;
/** Clock difference allowed between GitHub's created_at and ours. */
const CLOCK_SLACK_MS = 60 * 1000;

function stateKey(app: GitHubApp): Buffer {
  return Buffer.from(hkdfSync("sha256", app.config.privateKey, "", "relayctl github install state v1", 32));
}

const mac = (key: Buffer, nonce: string, tenantId: string, expires: number) =>
  createHmac("sha256", key).update(`${nonce}\n${tenantId}\n${expires}`).digest("base64url");

export async function issueInstallLink(db: Knex, app: GitHubApp, tenantId: string) {
  const nonce = randomBytes(18).toString("base64url");
  const now = Date.now();
  const expires = now + STATE_TTL_MS;
  await db("github_install_states").insert({
    nonce,
    tenant_id: tenantId,
    expires_at: expires,
    created_at: now,
  });
  const state = `${nonce}.${expires}.${mac(stateKey(app), nonce, tenantId, expires)}`;
  const { webUrl, slug } = app.config;
  // github.com: /apps/<slug>; GitHub Enterprise Server: /github-apps/<slug>.
  const path = webUrl === "https://github.com" ? "apps" : "github-apps";
  const url = `${webUrl}/${path}/${slug}/installations/new?state=${encodeURIComponent(state)}`;
  return { url, state, expires_at: new Date(expires).toISOString() };
}

const invalid = (why: string) => new RcError("RC_ERR_GITHUB_STATE_INVALID", `install state refused: ${why}`);

/** Spends the state; the tenant it was issued to and when. */
async function spendState(db: Knex, app: GitHubApp, state: string) {
  const [nonce, expiresText, sig] = state.split(".");
  if (!nonce || !expiresText || !sig || !/^\d+$/.test(expiresText)) throw invalid("malformed");
  const row = await db("github_install_states")
    .where({ nonce })
    .first<{ tenant_id: string; expires_at: number; created_at: number } | undefined>();
  if (!row) throw invalid("not issued by relayctl");
  const expected = Buffer.from(mac(stateKey(app), nonce, row.tenant_id, Number(row.expires_at)));
  const given = Buffer.from(sig);
  if (
    given.length !== expected.length ||
    !timingSafeEqual(given, expected) ||
    Number(expiresText) !== Number(row.expires_at)
  )
    throw invalid("bad signature");
  const now = Date.now();
  const spent = await db("github_install_states")
    .where({ nonce })
    .whereNull("used_at")
    .andWhere("expires_at", ">", now)
    .update({ used_at: now });
  if (spent !== 1) throw invalid("expired or already used");
  return { tenantId: row.tenant_id, issuedAt: Number(row.created_at) };
}

export async function completeSetup(
  db: Knex,
  app: GitHubApp,
  installationId: number,
  state: string,
  code: string | undefined,
  actor: Record<string, unknown>,
) {
  // The state is spent first, whatever follows: a refused attempt needs a new link.
  const { tenantId, issuedAt } = await spendState(db, app, state);
  if (!code) throw new RcError("RC_ERR_GITHUB_NOT_AUTHORIZED", "install refused: no authorization code");
  if (!(await app.userCanAccess(code, installationId)))
    throw new RcError(
      "RC_ERR_GITHUB_NOT_AUTHORIZED",
      `install refused: the authorization code was refused, or its user cannot access installation ${installationId}`,
    );
  const inst = await app.installation(installationId);
  if (!inst) throw invalid(`GitHub knows no installation ${installationId} of this App`);
  if (Date.parse(inst.created_at) < issuedAt - CLOCK_SLACK_MS) {
    const mine = await db("github_installations")
      .where({ id: installationId, tenant_id: tenantId })
      .first("id");
    if (!mine) throw invalid(`installation ${installationId} existed before this install link was issued`);
  }
  await upsertInstallation(db, inst);
  await db.transaction(async (trx) => {
    const bound = await trx("github_installations")
      .where({ id: installationId })
      .andWhere((q) => q.whereNull("tenant_id").orWhere({ tenant_id: tenantId }))
      .update({ tenant_id: tenantId, bound_at: Date.now() });
    if (bound !== 1) throw new RcError("RC_ERR_GITHUB_INSTALLATION_TAKEN");
    await adoptDeliveries(trx, installationId, tenantId);
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "github.installation_bound",
      payload: { installation_id: installationId, account: inst.account.login, ...actor },
    });
  });
  return { installation_id: installationId, tenant_id: tenantId, account: inst.account.login };
}
