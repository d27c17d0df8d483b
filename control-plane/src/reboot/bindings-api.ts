// /api/servers/{server_id}/provider — bind a server to its cloud provider (PUT,
// creates or replaces) or remove the binding (DELETE). Management API (X-API-Key);
// the token goes in and is never shown again. PUT needs RELAYCTL_MASTER_KEY.
import type { FastifyRequest } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { uuidSchema } from "../http/schemas.js";
import type { ApiContext } from "../http/context.js";
import { actorPayload } from "../auth/security-audit.js";
import { RcError } from "../errors.js";
import { bindProvider, unbindProvider } from "./bindings.js";
import { PROVIDERS } from "./providers/provider.js";

const params = z.object({ server_id: uuidSchema });

const putSchema = z.strictObject({
  provider: z.enum(PROVIDERS),
  // Both providers' ids are integers; kept as a string of digits.
  provider_server_id: z.string().regex(/^[0-9]{1,20}$/),
  token: z.string().min(1).max(4096).regex(/^\S+$/),
});

const actorOf = (req: FastifyRequest) => ({
  keyId: null,
  payload: actorPayload({ ...req.apiPrincipal, keyType: "api_key" }, req.ip),
});

export const providerBindingRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.put("/servers/:server_id/provider", { schema: { params, body: putSchema } }, async (req) => {
      const key = ctx.config.masterKey;
      if (!key)
        throw new RcError(
          "RC_ERR_MASTER_KEY_UNSET",
          "provider tokens cannot be stored: the control plane has no RELAYCTL_MASTER_KEY",
        );
      const p = req.apiPrincipal;
      return bindProvider(ctx.db, key, p.tenantId, req.params.server_id, req.body, actorOf(req));
    });

    app.delete("/servers/:server_id/provider", { schema: { params } }, async (req, reply) => {
      await unbindProvider(ctx.db, req.apiPrincipal.tenantId, req.params.server_id, actorOf(req));
      return reply.status(204).send();
    });
  };
