// Authentication and rate limiting as named, encapsulated Fastify plugins, each
// registered once in the scope it guards (fastify-plugin lifts the hooks and
// decorators into that scope, not the whole app):
//   automationKeyAuth — `Authorization: Bearer rca_...` (Automation API, external deploy)
//   apiKeyAuth        — `X-API-Key: rck_...` (management API, registry credentials)
// Both also admit a person's OAuth access token (rco_) into the same principal
// (oauth/principal.ts), and apiKeyAuth (and the Automation API's session reads)
// a person's web session cookie (accounts/session-principal.ts), when no
// credential header is sent: one admission path per route, whatever the credential.
// Both count every request of a known key in its window (429 beyond) and audit
// refusals of known keys once per window (security-audit.ts).
import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import type { Knex } from "knex";
import { admitAutomationKey } from "./admit-automation-key.js";
import { admitApiKey } from "./api-key.js";
import { auditRefusals } from "./security-audit.js";
import { accessTokenOf, admitAccessTokenForApi, admitAccessTokenForAutomation } from "../oauth/principal.js";
import {
  admitSessionForApi,
  admitSessionForAutomation,
  sessionOnly,
  sessionRead,
} from "../accounts/session-principal.js";

export interface AuthPluginOptions {
  db: Knex;
  /**
   * Authenticate every route of the scope in an onRequest hook (before its body
   * is read). false: routes call `req.admitAutomationKey()` themselves, for a
   * scope that also takes another credential (external deploy's rds_ tokens).
   * @default true
   */
  everyRoute?: boolean;
  /**
   * Admit a person's OAuth access token (rco_) as well as keys. false where what
   * the route creates is bound to an automation key (external-deploy sessions).
   * @default true
   */
  accessTokens?: boolean;
}

declare module "fastify" {
  interface FastifyRequest {
    /** Admits the request's automation key into `req.principal` (automationKeyAuth scopes). */
    admitAutomationKey(reply: FastifyReply): Promise<void>;
  }
}

export const automationKeyAuth = fp<AuthPluginOptions>(
  async (app, { db, everyRoute = true, accessTokens = true }) => {
    app.decorateRequest("principal", null as never);
    app.decorateRequest("keyActor", null);
    app.decorateRequest("admitAutomationKey", async function (this: FastifyRequest, reply: FastifyReply) {
      const token = accessTokens ? accessTokenOf(this, "authorization") : undefined;
      this.principal = token
        ? await admitAccessTokenForAutomation(db, this, reply, token)
        : accessTokens && sessionRead(this)
          ? await admitSessionForAutomation(db, this, reply)
          : await admitAutomationKey(db, this, reply);
    });
    if (everyRoute) app.addHook("onRequest", async (req, reply) => req.admitAutomationKey(reply));
    app.addHook("onError", auditRefusals(db));
  },
  { name: "relayctl-automation-key-auth", fastify: "5.x" },
);

export const apiKeyAuth = fp<AuthPluginOptions>(
  async (app, { db }) => {
    app.decorateRequest("apiPrincipal", null as never);
    app.decorateRequest("keyActor", null);
    app.addHook("onRequest", async (req, reply) => {
      const token = accessTokenOf(req, "either");
      req.apiPrincipal = token
        ? await admitAccessTokenForApi(db, req, reply, token)
        : sessionOnly(req)
          ? await admitSessionForApi(db, req, reply)
          : await admitApiKey(db, req, reply);
    });
    app.addHook("onError", auditRefusals(db));
  },
  { name: "relayctl-api-key-auth", fastify: "5.x" },
);
