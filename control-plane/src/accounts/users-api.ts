// People over the management API (an rck_ key, a person's rco_ token or their
// signed-in browser): who am I, the tenant's users, invites and disabling a
// user, an owner changing a person's role or `exec` grant. An API key acts as an
// owner; what each role may do is the routes' `role` (auth/roles.ts).
import { z } from "zod";
import { permissionsOf } from "../api/register-routes.js";
import { auditActor } from "../auth/principal.js";
import { RcError } from "../errors.js";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { isUuid } from "../http/validation.js";
import { issuerOf } from "../oauth/routes.js";
import { createInvite, listPendingInvites, revokeInvite } from "./invites.js";
import { meRoutes } from "./me-routes.js";
import { ROLES, type Role, changeUser, disableUser, listUsers, presentUser } from "./users.js";

const roleSchema = z.enum(ROLES);
// `member`, the role before owner/deployer/viewer, still names what it became: a deployer.
const inviteRole = z
  .union([roleSchema, z.literal("member")])
  .transform((r): Role => (r === "member" ? "deployer" : r));
const inviteBody = z
  .object({ email: z.string().min(3).max(254), role: inviteRole.default("deployer") })
  .strict();
const userChange = z.object({ role: roleSchema.optional(), can_exec: z.boolean().optional() }).strict();

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
      return {
        type: "user",
        ...common,
        user: p.user,
        // What this person may call ("METHOD /url" as declared): the dashboard hides the rest.
        may: permissionsOf(req.server, p),
        // An OAuth token's scopes (its power within the role); a session has the whole role.
        ...(p.scopes ? { scopes: p.scopes } : {}),
        ...(p.session ? { csrf_token: p.session.csrf } : {}),
      };
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
    method: "GET",
    url: "/api/users/invites",
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    summary: "Pending invites: who, as what, invited by whom, until when (no links: they were shown once)",
    handler: async (req) => ({ invites: await listPendingInvites(ctx.db, req.principal.tenantId) }),
  }),
  route({
    method: "DELETE",
    url: "/api/users/invites/:id",
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    summary: "Revoke a pending invite: its link stops working",
    schema: { params: userParams },
    handler: async (req, reply) => {
      const id = req.params.id.toLowerCase();
      if (!isUuid(id)) throw new RcError("RC_ERR_INVITE_INVALID", `invite '${req.params.id}' not found`);
      await revokeInvite(ctx.db, req.principal.tenantId, id, auditActor(req.principal, req.ip));
      return reply.status(204).send();
    },
  }),
  route({
    method: "PATCH",
    url: "/api/users/:id",
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    summary: "Change a person's role or exec grant",
    schema: { params: userParams, body: userChange },
    handler: async (req) => {
      if (!isUuid(req.params.id)) throw new RcError("RC_ERR_USER_NOT_FOUND");
      return changeUser(
        ctx.db,
        req.principal.tenantId,
        req.params.id.toLowerCase(),
        req.body,
        auditActor(req.principal, req.ip),
      );
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
