// Admission of an automation key, in the order every route that takes one uses:
// who (401 for an unknown key), how often (429: every request of a known key
// counts in its window, refused ones too, so refusals cannot flood), then
// whether (401 revoked/expired, 403 IP). Scope checks of the server and the
// operation are the routes' own (they know what is asked).
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { RcError } from "../errors.js";
import { type AutomationPrincipal, findAutomationKey, principalOf } from "./automation-key.js";
import { ipAllowed } from "./ip-allowlist.js";
import { enforceRateLimit } from "./security-audit.js";

export async function admitAutomationKey(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<AutomationPrincipal> {
  const row = await findAutomationKey(db, req);
  await enforceRateLimit(db, req.log, reply, req.keyActor!, req.ip, [
    { seconds: 60, limit: Number(row.rate_limit) },
  ]);
  const p = principalOf(row);
  if (!ipAllowed(p.ipAllowlist, req.ip)) {
    throw new RcError("RC_ERR_IP_NOT_ALLOWED", `caller IP ${req.ip} is not in this key's IP allowlist`);
  }
  return p;
}
