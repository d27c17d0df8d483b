// Binding an installation to a tenant. Nothing in a webhook says whose an
// installation is, so a signed-in person asks relayctl for an install link
// carrying a `state` = nonce.expiry.HMAC(nonce, tenant, person, expiry), keyed
// by a key derived from the App's private key (never stored). GitHub sends the
// user back to the setup URL with installation_id, that state and (the App
// requests user authorization during installation) an OAuth `code`.
// relayctl checks the HMAC, then that the browser is signed in as the person
// who made the link (routes.ts: without a session it leads to sign-in first;
// another person's session is refused and spends the state), spends the nonce
// (a conditional UPDATE: single use, even with several api instances),
// exchanges the code for the GitHub user's token and binds only an
// installation that user can access (GET /user/installations) and installed
// (the `sender` of GitHub's `installation` `created` delivery; for a personal
// account, that account), to the tenant the state was issued to. So a link
// handed to someone else binds nothing: they are not signed in as its maker,
// and the maker cannot finish with someone else's installation. The
// installation_id parameter alone proves nothing: knowing (or racing for)
// someone else's id does not get it, since the attacker's own code does not
// list it. Kept as defence in depth: an installation created before the state
// was issued is refused unless already this tenant's. One bound to another
// tenant is refused (409).
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import type { GitHubApp, GitHubInstallation } from "./app-client.js";
import { type DeliveryRow, adoptDeliveries, payloadText } from "./deliveries.js";
import { upsertInstallation } from "./installations.js";

/** How long an install link is good for. */
export const STATE_TTL_MS = 15 * 60 * 1000;
/** Clock difference allowed between GitHub's created_at and ours. */
const CLOCK_SLACK_MS = 60 * 1000;
/**
 * How long the setup URL waits for GitHub's `installation` `created` delivery,
 * which names who installed: GitHub sends it as the installation is made, so it
 * is usually there before the person's browser is.
 */
export const INSTALLER_WAIT_MS = 10_000;

function stateKey(app: GitHubApp): Buffer {
  return Buffer.from(hkdfSync("sha256", app.config.privateKey, "", "relayctl github install state v2", 32));
}

const mac = (key: Buffer, nonce: string, tenantId: string, userId: string, expires: number) =>
  createHmac("sha256", key).update(`${nonce}\n${tenantId}\n${userId}\n${expires}`).digest("base64url");

/** An install link for the signed-in person `userId` of `tenantId`: only they can finish it. */
export async function issueInstallLink(db: Knex, app: GitHubApp, tenantId: string, userId: string) {
  const nonce = randomBytes(18).toString("base64url");
  const now = Date.now();
  const expires = now + STATE_TTL_MS;
  await db("github_install_states").insert({
    nonce,
    tenant_id: tenantId,
    user_id: userId,
    expires_at: expires,
    created_at: now,
  });
  const state = `${nonce}.${expires}.${mac(stateKey(app), nonce, tenantId, userId, expires)}`;
  const { webUrl, slug } = app.config;
  // github.com: /apps/<slug>; GitHub Enterprise Server: /github-apps/<slug>.
  const path = webUrl === "https://github.com" ? "apps" : "github-apps";
  const url = `${webUrl}/${path}/${slug}/installations/new?state=${encodeURIComponent(state)}`;
  return { url, state, expires_at: new Date(expires).toISOString() };
}

const invalid = (why: string) => new RcError("RC_ERR_GITHUB_STATE_INVALID", `install state refused: ${why}`);

/** A state relayctl issued, still unspent: who asked for it and when. */
export interface IssuedState {
  nonce: string;
  tenantId: string;
  userId: string;
  issuedAt: number;
}

/** Checks the state without spending it (400 when forged, expired or spent). */
export async function checkState(db: Knex, app: GitHubApp, state: string): Promise<IssuedState> {
  const [nonce, expiresText, sig] = state.split(".");
  if (!nonce || !expiresText || !sig || !/^\d+$/.test(expiresText)) throw invalid("malformed");
  const row = await db("github_install_states").where({ nonce }).first<
    | {
        tenant_id: string;
        user_id: string | null;
        expires_at: number;
        used_at: number | null;
        created_at: number;
      }
    | undefined
  >();
  if (!row) throw invalid("not issued by relayctl");
  // A state from before links named their person binds nothing.
  if (!row.user_id) throw invalid("made before install links named their person: make a new one");
  const expected = Buffer.from(mac(stateKey(app), nonce, row.tenant_id, row.user_id, Number(row.expires_at)));
  const given = Buffer.from(sig);
  if (
    given.length !== expected.length ||
    !timingSafeEqual(given, expected) ||
    Number(expiresText) !== Number(row.expires_at)
  )
    throw invalid("bad signature");
  if (row.used_at !== null || Number(row.expires_at) <= Date.now()) throw invalid("expired or already used");
  return { nonce, tenantId: row.tenant_id, userId: row.user_id, issuedAt: Number(row.created_at) };
}

/** Spends the state: whatever follows, a refused attempt needs a new link. */
export async function spendState(db: Knex, nonce: string): Promise<void> {
  const spent = await db("github_install_states")
    .where({ nonce })
    .whereNull("used_at")
    .andWhere("expires_at", ">", Date.now())
    .update({ used_at: Date.now() });
  if (spent !== 1) throw invalid("expired or already used");
}

/**
 * Who installed: for a personal account, its owner (nobody else can install
 * there); for an organisation, the `sender` of GitHub's `installation`
 * `created` delivery, waited for up to INSTALLER_WAIT_MS. Undefined when unknown.
 */
async function installerOf(db: Knex, inst: GitHubInstallation) {
  if (inst.account.type === "User" && inst.account.id)
    return { id: Number(inst.account.id), login: inst.account.login };
  const deadline = Date.now() + INSTALLER_WAIT_MS;
  for (;;) {
    const d = await db("github_deliveries")
      .where({ installation_id: inst.id, event: "installation", action: "created" })
      .orderBy("seq", "desc")
      .first<Pick<DeliveryRow, "payload_gz"> | undefined>("payload_gz");
    if (d) {
      const sender = (
        JSON.parse(payloadText(d as DeliveryRow)) as { sender?: { id?: unknown; login?: unknown } }
      ).sender;
      const id = Number(sender?.id);
      return Number.isSafeInteger(id) && id > 0 ? { id, login: String(sender?.login ?? "") } : undefined;
    }
    if (Date.now() >= deadline) return undefined;
    await new Promise((r) => setTimeout(r, 250));
  }
}

const notAuthorized = (why: string) => new RcError("RC_ERR_GITHUB_NOT_AUTHORIZED", `install refused: ${why}`);

/**
 * Binds the installation to the state's tenant. The caller (routes.ts) has
 * checked that the browser is signed in as the state's person.
 */
export async function completeSetup(
  db: Knex,
  app: GitHubApp,
  installationId: number,
  st: IssuedState,
  code: string | undefined,
  actor: Record<string, unknown>,
) {
  // The state is spent first, whatever follows: a refused attempt needs a new link.
  await spendState(db, st.nonce);
  const { tenantId, issuedAt } = st;
  if (!code) throw notAuthorized("no authorization code");
  const inst = await app.installation(installationId);
  if (!inst) throw invalid(`GitHub knows no installation ${installationId} of this App`);
  const mine = await db("github_installations")
    .where({ id: installationId, tenant_id: tenantId })
    .first("id");
  if (!mine && Date.parse(inst.created_at) < issuedAt - CLOCK_SLACK_MS)
    throw invalid(`installation ${installationId} existed before this install link was issued`);
  const who = await app.authorizingUser(code, installationId);
  if (!who?.canAccess)
    throw notAuthorized(
      `the authorization code was refused, or its user cannot access installation ${installationId}`,
    );
  // Access is not enough (an organisation member with read access to one
  // repository is listed too): the GitHub user must be the one who installed.
  if (!mine) {
    const by = await installerOf(db, inst);
    if (!by)
      throw notAuthorized(
        `GitHub has not delivered the \`installation\` event that names who installed ${installationId} (check the App's webhook deliveries); make a new install link and try again`,
      );
    if (by.id !== who.id)
      throw notAuthorized(
        `the GitHub user who authorised (${who.login}) is not the one who installed (${by.login})`,
      );
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
      payload: {
        installation_id: installationId,
        account: inst.account.login,
        github_user: who.login,
        ...actor,
      },
    });
  });
  return { installation_id: installationId, tenant_id: tenantId, account: inst.account.login };
}
