// /api/registry-credentials — the management API's routes for the tenant's
// registry credentials: create, list, delete (changes owner only). Passwords go
// in and are never shown again. Every route needs RELAYCTL_MASTER_KEY: 503
// without it, once the caller is admitted and before its body is read.
import { z } from "zod";
import { RcError } from "../errors.js";
import { nothing, registryCredential, registryCredentialList } from "../http/answers.js";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { isUuid } from "../http/validation.js";
import { createCredential, deleteCredential, listCredentials, requireMasterKey } from "./credentials.js";

const createSchema = z.strictObject({
  name: z.string().min(1).max(128),
  // "" means Docker Hub; anything else is parsed by registry-address.ts.
  registry_url: z.string().max(512),
  username: z.string().min(1).max(255),
  password: z.string().min(1).max(8192),
});
const params = z.object({ id: z.string() });

const BASE = "/api/registry-credentials";

export const registryCredentialsRoutes = (ctx: ApiContext): RouteSpec[] => {
  // preParsing: after admission and the role check (onRequest), before the body is read.
  const options = {
    preParsing: async () => {
      requireMasterKey(ctx.config.masterKey);
    },
  };
  return [
    route({
      method: "POST",
      url: BASE,
      access: { credentials: MANAGEMENT, role: "owner" },
      tag: "management",
      schema: { body: createSchema },
      responses: { 201: registryCredential },
      options,
      handler: async (req, reply) => {
        const p = req.principal;
        const created = await createCredential(
          ctx.db,
          requireMasterKey(ctx.config.masterKey),
          p.tenantId,
          p,
          req.body,
        );
        return reply.status(201).send(created);
      },
    }),
    route({
      method: "GET",
      url: BASE,
      access: { credentials: MANAGEMENT },
      tag: "management",
      responses: { 200: registryCredentialList },
      options,
      handler: async (req) => listCredentials(ctx.db, req.principal.tenantId),
    }),
    route({
      method: "DELETE",
      url: `${BASE}/:id`,
      access: { credentials: MANAGEMENT, role: "owner" },
      tag: "management",
      schema: { params },
      responses: { 204: nothing },
      options,
      handler: async (req, reply) => {
        const id = req.params.id;
        const found =
          isUuid(id) && (await deleteCredential(ctx.db, req.principal.tenantId, req.principal, id));
        if (!found) throw new RcError("RC_ERR_CREDENTIAL_NOT_FOUND", `registry credential '${id}' not found`);
        return reply.status(204).send();
      },
    }),
  ];
};
