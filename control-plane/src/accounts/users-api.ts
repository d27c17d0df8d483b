// People over the management API (an rck_ key, a person's rco_ token or their
// signed-in browser): who am I, the tenant's users, invites and disabling a
// user. An API key acts as an owner; members may read, owners change (the
// routes' `role`).
import { z } from "zod";
import { auditActor } from "../auth/principal.js";
import { RcError } from "../errors.js";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { isUuid } from "../http/validation.js";
import { issuerOf } from "../oauth/routes.js";
import { createInvite } from "./invites.js";
import { meRoutes } from "./me-routes.js";
import { ROLES, type Role, disableUser, listUsers, presentUser } from "./users.js";

const inviteBody = z
  .object({ email: z.string().min(3).max(254), role: z.enum(ROLES as [Role, ...Role[]]).default("member") })
  .strict();

const userParams = z.object({ id: z.string() });

export const usersRoutes = (ctx: ApiContext): RouteSpec[] => [
  ...meRoutes(ctx),
  // The dashboard reads csrf_token here (only a session has one) and sends it
  // back as X-CSRF-Token on every change.
  route({
    method: "GET",
    url: "/api/me",
    access: { credentials: MANAGEMENT },
    tag: "management",
    handler: async (req) => {
      const p = req.principal;
      const tenant = await ctx.db("tenants").where({ id: p.tenantId }).first<{ name: string }>("name");
      const common = {
        tenant_id: p.tenantId,
        tenant_name: tenant.name,
        tenant: { id: p.tenantId, name: tenant.name },
      };
      if (!p.user) return { type: "api_key", ...common, key: { id: p.keyId, name: p.keyName } };
      return { type: "user", ...common, user: p.user, ...(p.session ? { csrf_token: p.session.csrf } : {}) };
    },
  }),
  route({
    method: "GET",
    url: "/api/users",
    access: { credentials: MANAGEMENT },
    tag: "management",
    handler: async (req) => ({
      users: (await listUsers(ctx.db, req.principal.tenantId)).map(presentUser),
    }),
  }),
  route({
    method: "POST",
    url: "/api/users/invites",
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    schema: { body: inviteBody },
    handler: async (req, reply) => {
      const invite = await createInvite(
        ctx.db,
        req.principal.tenantId,
        req.body,
        auditActor(req.principal, req.ip),
      );
      const { token, ...rest } = invite;
      // The link is the secret: shown here once, stored as SHA-256.
      return reply.status(201).send({ ...rest, invite_url: `${issuerOf(ctx, req)}/invite/${token}` });
    },
  }),
  route({
    method: "DELETE",
    url: "/api/users/:id",
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    schema: { params: userParams },
    handler: async (req, reply) => {
      if (!isUuid(req.params.id)) throw new RcError("RC_ERR_USER_NOT_FOUND");
      await disableUser(
        ctx.db,
        req.principal.tenantId,
        req.params.id.toLowerCase(),
        auditActor(req.principal, req.ip),
      );
      return reply.status(204).send();
    },
  }),
];
