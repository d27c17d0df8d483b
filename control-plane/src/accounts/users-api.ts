// People over the management API (an rck_ key or a person's rco_ token, through
// apiKeyAuth): who am I, the tenant's users, invites and disabling a user. An
// API key acts as an owner; members may read, owners change (oauth/principal.ts).
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { z } from "zod";
import type { ApiContext } from "../http/context.js";
import { isUuid } from "../http/validation.js";
import { apiKeyAuth } from "../auth/plugins.js";
import { actorPayload } from "../auth/security-audit.js";
import { RcError } from "../errors.js";
import { issuerOf } from "../oauth/routes.js";
import { createInvite } from "./invites.js";
import { meRoutes } from "./me-routes.js";
import { ROLES, type Role, disableUser, listUsers, presentUser } from "./users.js";

const actorOf = (req: FastifyRequest) =>
  actorPayload({ ...req.apiPrincipal, keyType: req.apiPrincipal.user ? "oauth_token" : "api_key" }, req.ip);

const inviteBody = z
  .object({ email: z.string().min(3).max(254), role: z.enum(ROLES as [Role, ...Role[]]).default("member") })
  .strict();

export const usersApi =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    await app.register(apiKeyAuth, { db: ctx.db });
    await app.register(meRoutes(ctx));

    // The dashboard reads csrf_token here (only a session has one) and sends it
    // back as X-CSRF-Token on every change.
    app.get("/me", async (req) => {
      const p = req.apiPrincipal;
      const tenant = await ctx.db("tenants").where({ id: p.tenantId }).first<{ name: string }>("name");
      const common = {
        tenant_id: p.tenantId,
        tenant_name: tenant.name,
        tenant: { id: p.tenantId, name: tenant.name },
      };
      if (!p.user) return { type: "api_key", ...common, key: { id: p.keyId, name: p.keyName } };
      return { type: "user", ...common, user: p.user, ...(p.session ? { csrf_token: p.session.csrf } : {}) };
    });

    app.get("/users", async (req) => ({
      users: (await listUsers(ctx.db, req.apiPrincipal.tenantId)).map(presentUser),
    }));

    app.post("/users/invites", { schema: { body: inviteBody } }, async (req, reply) => {
      const body = req.body as z.infer<typeof inviteBody>;
      const invite = await createInvite(ctx.db, req.apiPrincipal.tenantId, body, actorOf(req));
      const { token, ...rest } = invite;
      // The link is the secret: shown here once, stored as SHA-256.
      return reply.status(201).send({ ...rest, invite_url: `${issuerOf(ctx, req)}/invite/${token}` });
    });

    app.delete<{ Params: { id: string } }>("/users/:id", async (req, reply) => {
      if (!isUuid(req.params.id)) throw new RcError("RC_ERR_USER_NOT_FOUND");
      await disableUser(ctx.db, req.apiPrincipal.tenantId, req.params.id.toLowerCase(), actorOf(req));
      return reply.status(204).send();
    });
  };
