// /api/registry-credentials — the general API (X-API-Key: rck_...) for the
// tenant's registry credentials: create, list, delete. Passwords go in and are
// never shown again. Every route needs RELAYCTL_MASTER_KEY (503 without it).
import type { FastifyPluginAsync } from "fastify";
import { API_KEY_WINDOWS, authenticateApiKey } from "../auth/api-key.js";
import { auditRefusals, enforceRateLimit } from "../auth/security-audit.js";
import type { ApiContext } from "../api/context.js";
import { UUID_PATTERN } from "../api/automation/schemas.js";
import { RcError } from "../errors.js";
import {
  type NewCredential,
  createCredential,
  deleteCredential,
  listCredentials,
  requireMasterKey,
} from "./credentials.js";

const uuid = new RegExp(UUID_PATTERN);

const createSchema = {
  type: "object",
  required: ["name", "registry_url", "username", "password"],
  additionalProperties: false,
  properties: {
    name: { type: "string", minLength: 1, maxLength: 128 },
    // "" means Docker Hub; anything else is parsed by registry-address.ts.
    registry_url: { type: "string", maxLength: 512 },
    username: { type: "string", minLength: 1, maxLength: 255 },
    password: { type: "string", minLength: 1, maxLength: 8192 },
  },
} as const;

export const registryCredentialsApi =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    if (!app.hasRequestDecorator("apiPrincipal")) app.decorateRequest("apiPrincipal", null as never);
    if (!app.hasRequestDecorator("keyActor")) app.decorateRequest("keyActor", null);
    app.addHook("onRequest", async (req, reply) => {
      req.apiPrincipal = await authenticateApiKey(ctx.db, req);
      await enforceRateLimit(ctx.db, req.log, reply, req.keyActor!, req.ip, API_KEY_WINDOWS);
      requireMasterKey(ctx.config.masterKey);
    });
    app.addHook("onError", auditRefusals(ctx.db));

    app.post<{ Body: NewCredential }>("/", { schema: { body: createSchema } }, async (req, reply) => {
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
        uuid.test(id) && (await deleteCredential(ctx.db, req.apiPrincipal.tenantId, req.apiPrincipal, id));
      if (!found) throw new RcError("RC_ERR_CREDENTIAL_NOT_FOUND", `registry credential '${id}' not found`);
      return reply.status(204).send();
    });
  };
