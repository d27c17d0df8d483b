// The one admission path: from the credentials a route declares (http/route.ts)
// and the headers a request presents, which credential it is, admitted by its
// own module in the order every credential follows — who (401), how often (429,
// refused requests of a known key count too), then whether (401 revoked or
// expired, 403 IP or CSRF). What a header selects:
//   Bearer rds_                      → session_token (external deploy)
//   Bearer rco_ (X-API-Key rco_ too where api_key is taken) → access_token
//   no credential header + cookie    → web_session (GET only beside automation_key)
//   otherwise                        → api_key (X-API-Key) or automation_key (Bearer rca_);
//                                      a route taking both (application logs) goes by the header
import { timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { admitWebSession, sessionOnly } from "../accounts/session-principal.js";
import { admitAutomationKey } from "../auth/admit-automation-key.js";
import { API_KEY_WINDOWS, admitApiKey } from "../auth/api-key.js";
import type { Principal } from "../auth/principal.js";
import { RcError } from "../errors.js";
import { admitSessionToken } from "../external-deploy/admission.js";
import { sessionBearer } from "../external-deploy/sessions.js";
import type { Credential } from "../http/route.js";
import type { OperationScope } from "../operations/types.js";
import { USER_AUTOMATION_WINDOWS, accessTokenOf, admitAccessToken } from "../oauth/principal.js";

export interface AdmissionDeps {
  db: Knex;
  /** RELAYCTL_METRICS_TOKEN: when set, `metrics_token` routes need it. */
  metricsToken?: string;
}

/** Admits a request to a route taking `credentials`; undefined for a metrics token (no principal). */
export type Admit = (req: FastifyRequest, reply: FastifyReply) => Promise<Principal | undefined>;

function bearerMatches(req: FastifyRequest, token: string): boolean {
  const given = Buffer.from(/^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? "");
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

export function admissionFor(
  deps: AdmissionDeps,
  credentials: readonly Credential[],
  /** The route's operation start carries an automation key's count (auth/deferred-count.ts), and its scope. */
  countWithStart?: { scope?: OperationScope },
): Admit | undefined {
  if (credentials.length === 0) return undefined;
  const { db } = deps;
  const takes = (c: Credential) => credentials.includes(c);
  if (takes("metrics_token"))
    return async (req) => {
      if (deps.metricsToken && !bearerMatches(req, deps.metricsToken))
        throw new RcError("RC_ERR_UNAUTHENTICATED");
      return undefined;
    };
  const management = takes("api_key");
  // A person's limit follows the API they call: the management API's windows, or an automation key's default.
  const personWindows = management ? API_KEY_WINDOWS : USER_AUTOMATION_WINDOWS;
  return async (req, reply) => {
    if (takes("session_token")) {
      const token = sessionBearer(req); // 401 when the Authorization header is missing or malformed
      // Ending an ended session again is fine (DELETE is idempotent); syncing into one is not.
      if (token)
        return admitSessionToken(db, req, reply, token, req.method === "DELETE" ? "allowed" : "refused");
      if (!takes("automation_key"))
        throw new RcError(
          "RC_ERR_SESSION_INVALID",
          "sync needs the session's token: 'Authorization: Bearer rds_...'",
        );
    }
    const token = takes("access_token")
      ? accessTokenOf(req, management ? "either" : "authorization")
      : undefined;
    if (token) return admitAccessToken(db, req, reply, token, personWindows);
    if (takes("web_session") && sessionOnly(req) && (management || req.method === "GET"))
      return admitWebSession(db, req, reply);
    if (management && takes("automation_key") && /^Bearer rca_/.test(req.headers.authorization ?? ""))
      return admitAutomationKey(db, req, reply);
    if (management) return admitApiKey(db, req, reply);
    return admitAutomationKey(db, req, reply, countWithStart);
  };
}
