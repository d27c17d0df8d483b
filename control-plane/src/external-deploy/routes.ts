// The external-deploy endpoints (no version segment, contract "Versioning"):
//   POST   /external-deploy/session          rca_ key with `external_deploy` → 201 session
//   POST   /external-deploy/sync             rds_ session token → 200 results + errors
//   DELETE /external-deploy/session/{id}     rca_ key with `external_deploy` whose server scope
//                                            covers the session, or the session's token → 204
// Calls made with a session token are held to the rules of the key that opened
// the session, checked again each time (session-key.ts), and count against its
// rate limit.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { admitAutomationKey } from "../auth/admit-automation-key.js";
import { requireOperation } from "../auth/automation-key.js";
import { automationKeyAuth } from "../auth/plugins.js";
import { enforceRateLimit } from "../auth/security-audit.js";
import { RcError } from "../errors.js";
import type { ApiContext } from "../http/context.js";
import { CONTAINER_NAME_PATTERN } from "../applications/validate.js";
import { type SessionRow, endSession, openSession, sessionBearer, sessionOfToken } from "./sessions.js";
import { admitSessionKey } from "./session-key.js";
import { syncDeployments } from "./sync.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The session of the request's rds_ token and its key's server scope (sync). */
    deploySession: { session: SessionRow; servers: string[] };
  }
}

const containerName = z.string().regex(new RegExp(CONTAINER_NAME_PATTERN)).max(255);
export const MAX_CONTAINERS = 200;

const sessionSchema = z.strictObject({
  container_names: z.array(containerName).min(1).max(MAX_CONTAINERS),
  workflow_run_id: z.string().min(1).max(255).optional(),
  commit_sha: z.string().min(1).max(255).optional(),
});

const syncSchema = z.strictObject({
  deployments: z
    .array(
      z.strictObject({
        container_name: containerName,
        container_port: z.int().min(1).max(65535),
        image_tag: z.string().min(1).max(512),
        force: z.boolean().optional(),
      }),
    )
    .min(1)
    .max(MAX_CONTAINERS),
});

const sessionParams = z.object({ id: z.string() });

/**
 * A call made with a session token: the session (401), its opening key's rules
 * again (session-key.ts: 401/403), then that key's rate limit (429). Returns the
 * session and the key's server scope.
 */
async function admitSession(
  ctx: ApiContext,
  req: FastifyRequest,
  reply: FastifyReply,
  token: string,
  ended: "refused" | "allowed" = "refused",
) {
  const session = await sessionOfToken(ctx.db, token, ended);
  const actor = { keyId: session.key_id, keyName: session.key_name, tenantId: session.tenant_id };
  req.keyActor = { ...actor, keyType: "automation_key" };
  const servers = admitSessionKey(session, req.ip);
  await enforceRateLimit(ctx.db, req.log, reply, { ...actor, keyType: "automation_key" }, req.ip, [
    { seconds: 60, limit: Number(session.key_rate_limit) },
  ]);
  return { session, servers };
}

export const externalDeployApi =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    // Per route: /session takes an rca_ key, /sync a session's rds_ token, DELETE either.
    await app.register(automationKeyAuth, { db: ctx.db, everyRoute: false, accessTokens: false });
    app.decorateRequest("deploySession", null as never);

    app.post(
      "/session",
      {
        schema: { body: sessionSchema },
        onRequest: async (req, reply) => req.admitAutomationKey(reply),
        preValidation: async (req) => requireOperation(req.principal, "external_deploy"),
      },
      async (req, reply) => {
        const ttl = ctx.config.externalDeploySessionTtlSeconds;
        return reply.status(201).send(await openSession(ctx.db, req.principal, req.body, ttl, req.ip));
      },
    );

    // Authenticated before the body is validated: a bad token is a 401 whatever it sends.
    app.post(
      "/sync",
      {
        schema: { body: syncSchema },
        onRequest: async (req, reply) => {
          const token = sessionBearer(req);
          if (!token) {
            throw new RcError(
              "RC_ERR_SESSION_INVALID",
              "sync needs the session's token: 'Authorization: Bearer rds_...'",
            );
          }
          req.deploySession = await admitSession(ctx, req, reply, token);
        },
      },
      async (req) => {
        const { session, servers } = req.deploySession;
        return syncDeployments(ctx, session, servers, req.body.deployments, req.ip);
      },
    );

    // With the session's own token: ending it again is 204 too (idempotent), as long
    // as its key still admits the call. With an rca_ key: `external_deploy` and
    // every application of the session within the key's server scope (403).
    app.delete("/session/:id", { schema: { params: sessionParams } }, async (req, reply) => {
      const token = sessionBearer(req);
      if (token) {
        const { session } = await admitSession(ctx, req, reply, token, "allowed");
        if (session.id !== req.params.id.toLowerCase()) {
          throw new RcError(
            "RC_ERR_SESSION_NOT_FOUND",
            `external-deploy session '${req.params.id}' not found`,
          );
        }
        await endSession(ctx.db, session.tenant_id, session.id, {
          actor: { session_id: session.id },
          ip: req.ip,
        });
      } else {
        const p = await admitAutomationKey(ctx.db, req, reply);
        requireOperation(p, "external_deploy");
        const actor = {
          actor: { key_id: p.keyId, key_name: p.keyName, key_type: "automation_key" },
          ip: req.ip,
        };
        await endSession(ctx.db, p.tenantId, req.params.id, actor, p.servers);
      }
      return reply.status(204).send();
    });
  };
