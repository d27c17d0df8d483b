// /api/registry-credentials — the general API (X-API-Key: rck_...) for the
// tenant's registry credentials: create, list, delete. Passwords go in and are
// never shown again. Every route needs RELAYCTL_MASTER_KEY (503 without it).
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { isUuid } from "../http/validation.js";
import type { ApiContext } from "../http/context.js";
import { RcError } from "../errors.js";
import { createCredential, deleteCredential, listCredentials, requireMasterKey } from "./credentials.js";

const createSchema = z.strictObject({
  name: z.string().min(1).max(128),
  // "" means Docker Hub; anything else is parsed by registry-address.ts.
  registry_url: z.string().max(512),
  username: z.string().min(1).max(255),
  password: z.string().min(1).max(8192),
});

/** Registered in the management scope: apiKeyAuth has admitted the caller. */
export const registryCredentialsApi =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.addHook("onRequest", async () => {
      requireMasterKey(ctx.config.masterKey);
    });

    app.post("/", { schema: { body: createSchema } }, async (req, reply) => {
      const p = req.apiPrincipal;
      const created = await createCredential(
        ctx.db,
        requireMasterKey(ctx.config.masterKey),
        p.tenantId,
        p,
        req.body,
      );
      return reply.status(201).send(created);
    });

    app.get("/", async (req) => listCredentials(ctx.db, req.apiPrincipal.tenantId));

    app.delete<{ Params: { id: string } }>("/:id", async (req, reply) => {
      const id = req.params.id;
      const found =
        isUuid(id) && (await deleteCredential(ctx.db, req.apiPrincipal.tenantId, req.apiPrincipal, id));
      if (!found) throw new RcError("RC_ERR_CREDENTIAL_NOT_FOUND", `registry credential '${id}' not found`);
      return reply.status(204).send();
    });
  };
