// /api/servers/{server_id}/provider — bind a server to its cloud provider (PUT,
// creates or replaces) or remove the binding (DELETE). Management API, owner
// only; the token goes in and is never shown again. PUT needs RELAYCTL_MASTER_KEY.
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { auditActor } from "../auth/principal.js";
import { RcError } from "../errors.js";
import { nothing, providerBinding } from "../http/answers.js";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { uuidSchema } from "../http/schemas.js";
import { bindProvider, unbindProvider } from "./bindings.js";
import { PROVIDERS } from "./providers/provider.js";

const params = z.object({ server_id: uuidSchema });

const putSchema = z.strictObject({
  provider: z.enum(PROVIDERS),
  // Both providers' ids are integers; kept as a string of digits.
  provider_server_id: z.string().regex(/^[0-9]{1,20}$/),
  token: z.string().min(1).max(4096).regex(/^\S+$/),
});

const actorOf = (req: FastifyRequest) => ({ keyId: null, payload: auditActor(req.principal, req.ip) });

const BASE = "/api/servers/:server_id/provider";

export const providerBindingRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "PUT",
    url: BASE,
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    schema: { params, body: putSchema },
    responses: { 200: providerBinding },
    handler: async (req) => {
      const key = ctx.config.masterKey;
      if (!key)
        throw new RcError(
          "RC_ERR_MASTER_KEY_UNSET",
          "provider tokens cannot be stored: the control plane has no RELAYCTL_MASTER_KEY",
        );
      const p = req.principal;
      return bindProvider(ctx.db, key, p.tenantId, req.params.server_id, req.body, actorOf(req));
    },
  }),
  route({
    method: "DELETE",
    url: BASE,
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    schema: { params },
    responses: { 204: nothing },
    handler: async (req, reply) => {
      await unbindProvider(ctx.db, req.principal.tenantId, req.params.server_id, actorOf(req));
      return reply.status(204).send();
    },
  }),
];
