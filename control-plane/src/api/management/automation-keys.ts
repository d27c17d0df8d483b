// /api/automation-keys — create, list, update and revoke the tenant's automation
// keys (management API; changes are owner only). The work is the key service's
// (auth/automation-key-service.ts), which the operator CLI calls too; the `rca_`
// secret is in the create response only.
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import {
  type AuditActor,
  createAutomationKey,
  keyCreateSchema,
  keyPatchSchema,
  listAutomationKeys,
  revokeAutomationKey,
  updateAutomationKey,
} from "../../auth/automation-key-service.js";
import { auditActor } from "../../auth/principal.js";
import { automationKey, automationKeyCreated, automationKeyList, nothing } from "../../http/answers.js";
import type { ApiContext } from "../../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../../http/route.js";

const params = z.object({ id: z.string() });

const actorOf = (req: FastifyRequest) => auditActor(req.principal, req.ip) as AuditActor;

const owner = { credentials: MANAGEMENT, role: "owner" } as const;

export const automationKeysRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "POST",
    url: "/api/automation-keys",
    access: owner,
    tag: "management",
    schema: { body: keyCreateSchema },
    responses: { 201: automationKeyCreated },
    handler: async (req, reply) => {
      const created = await createAutomationKey(ctx.db, req.principal.tenantId, req.body, actorOf(req));
      return reply.status(201).send(created);
    },
  }),
  route({
    method: "GET",
    url: "/api/automation-keys",
    access: { credentials: MANAGEMENT },
    tag: "management",
    responses: { 200: automationKeyList },
    handler: async (req) => ({
      automation_keys: await listAutomationKeys(ctx.db, req.principal.tenantId),
    }),
  }),
  route({
    method: "PATCH",
    url: "/api/automation-keys/:id",
    access: owner,
    tag: "management",
    schema: { params, body: keyPatchSchema },
    responses: { 200: automationKey },
    handler: async (req) =>
      updateAutomationKey(ctx.db, req.principal.tenantId, req.params.id, req.body, actorOf(req)),
  }),
  route({
    method: "DELETE",
    url: "/api/automation-keys/:id",
    access: owner,
    tag: "management",
    schema: { params },
    responses: { 204: nothing },
    handler: async (req, reply) => {
      await revokeAutomationKey(ctx.db, req.principal.tenantId, req.params.id, actorOf(req));
      return reply.status(204).send();
    },
  }),
];
