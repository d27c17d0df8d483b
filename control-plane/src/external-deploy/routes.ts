// The external-deploy endpoints (no version segment, contract "Versioning"):
//   POST   /external-deploy/session          rca_ key with `external_deploy` → 201 session
//   POST   /external-deploy/sync             rds_ session token → 200 results + errors
//   DELETE /external-deploy/session/{id}     rca_ key with `external_deploy` whose server scope
//                                            covers the session, or the session's token → 204
// Calls made with a session token are held to the rules of the key that opened
// the session, checked again each time (session-key.ts), and count against its
// rate limit.
import { z } from "zod";
import { CONTAINER_NAME_PATTERN } from "../applications/validate.js";
import { auditActor } from "../auth/principal.js";
import { RcError } from "../errors.js";
import { nothing, session, syncAnswer } from "../http/answers.js";
import type { ApiContext } from "../http/context.js";
import { type RouteSpec, route } from "../http/route.js";
import { endSession, openSession } from "./sessions.js";
import { syncDeployments } from "./sync.js";

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

export const externalDeployRoutes = (ctx: ApiContext): RouteSpec[] => [
  // An rca_ key only: a session is bound to the key that opened it (no access tokens).
  route({
    method: "POST",
    url: "/external-deploy/session",
    access: { credentials: ["automation_key"], scope: "external_deploy" },
    tag: "external-deploy",
    schema: { body: sessionSchema },
    responses: { 201: session },
    handler: async (req, reply) => {
      const ttl = ctx.config.externalDeploySessionTtlSeconds;
      return reply.status(201).send(await openSession(ctx.db, req.principal, req.body, ttl, req.ip));
    },
  }),
  // The session's token is admitted before the body is validated (api/admission.ts):
  // a bad token is a 401 whatever it sends.
  route({
    method: "POST",
    url: "/external-deploy/sync",
    access: { credentials: ["session_token"] },
    tag: "external-deploy",
    schema: { body: syncSchema },
    responses: { 200: syncAnswer },
    handler: async (req) => {
      const { session, servers, applications } = req.deploySession;
      return syncDeployments(ctx, session, servers, req.body.deployments, req.ip, applications);
    },
  }),
  // With the session's own token: ending it again is 204 too (idempotent), as long
  // as its key still admits the call. With an rca_ key: `external_deploy` and
  // every application of the session within the key's server scope (403).
  route({
    method: "DELETE",
    url: "/external-deploy/session/:id",
    access: { credentials: ["automation_key", "session_token"], scope: "external_deploy" },
    tag: "external-deploy",
    schema: { params: sessionParams },
    responses: { 204: nothing },
    handler: async (req, reply) => {
      const p = req.principal;
      if (p.kind === "session_token") {
        const { session } = req.deploySession;
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
        await endSession(ctx.db, p.tenantId, req.params.id, auditActor(p, req.ip), p.servers);
      }
      return reply.status(204).send();
    },
  }),
];
