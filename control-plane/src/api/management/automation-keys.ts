// /api/automation-keys — create, list, update and revoke the tenant's automation
// keys (X-API-Key auth). The `rca_` secret is in the create response only; the
// database keeps its SHA-256. Another tenant's key id is a 404.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { appendAuditEvent } from "../../audit/audit-log.js";
import { newAutomationKeyRow } from "../../auth/automation-key.js";
import { actorPayload } from "../../auth/security-audit.js";
import { RcError } from "../../errors.js";
import { iso } from "../../lib/time.js";
import { UUID_PATTERN, uuidSchema } from "../automation/schemas.js";
import type { ApiContext } from "../context.js";
import { OPERATIONS, type ScopeInput, compileScope } from "./key-scope.js";

interface KeyBody extends ScopeInput {
  name?: string;
  rate_limit?: number;
}

const fields = {
  name: { type: "string", minLength: 1, maxLength: 128 },
  servers: { type: "array", maxItems: 1000, items: uuidSchema },
  operations: { type: "array", maxItems: OPERATIONS.length, items: { type: "string", enum: OPERATIONS } },
  allowed_credential_ids: { type: "array", maxItems: 1000, items: uuidSchema },
  ip_allowlist: { type: "array", maxItems: 256, items: { type: "string", minLength: 1, maxLength: 64 } },
  rate_limit: { type: "integer", minimum: 1, maximum: 1000 },
  expires_at: { type: ["string", "null"], maxLength: 64 },
} as const;

const createSchema = { type: "object", required: ["name"], additionalProperties: false, properties: fields };
const patchSchema = { type: "object", minProperties: 1, additionalProperties: false, properties: fields };
const COLUMNS = [
  "id",
  "name",
  "servers",
  "operations",
  "allowed_credential_ids",
  "ip_allowlist",
  "rate_limit",
  "expires_at",
  "created_at",
];

// biome-ignore lint/suspicious/noExplicitAny: a row as knex returns it
function present(row: any) {
  return {
    id: row.id,
    name: row.name,
    servers: JSON.parse(row.servers),
    operations: JSON.parse(row.operations),
    allowed_credential_ids: JSON.parse(row.allowed_credential_ids),
    ip_allowlist: JSON.parse(row.ip_allowlist),
    rate_limit: Number(row.rate_limit),
    expires_at: iso(row.expires_at),
    created_at: iso(row.created_at),
  };
}

const uuid = new RegExp(UUID_PATTERN);

async function findKey(db: Knex, req: FastifyRequest<{ Params: { id: string } }>) {
  const id = req.params.id;
  const row = uuid.test(id)
    ? await db("automation_keys")
        .where({ id: id.toLowerCase(), tenant_id: req.apiPrincipal.tenantId })
        .whereNull("revoked_at")
        .first(COLUMNS)
    : undefined;
  if (!row) throw new RcError("RC_ERR_KEY_NOT_FOUND", `automation key '${id}' not found`);
  return row;
}

const actorOf = (req: FastifyRequest) => actorPayload({ ...req.apiPrincipal, keyType: "api_key" }, req.ip);

export const automationKeysRoutes =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    app.post<{ Body: KeyBody }>(
      "/automation-keys",
      { schema: { body: createSchema } },
      async (req, reply) => {
        const tenantId = req.apiPrincipal.tenantId;
        const scope = await compileScope(ctx.db, tenantId, req.body);
        // name is required by createSchema.
        const { key, row } = newAutomationKeyRow(tenantId, req.body.name!, {
          rate_limit: req.body.rate_limit ?? 100,
          ...scope,
        });
        const resource = present(row);
        await ctx.db.transaction(async (trx) => {
          await trx("automation_keys").insert(row);
          await appendAuditEvent(trx, {
            tenantId,
            eventType: "automation_key.created",
            keyId: row.id,
            payload: { key_id: row.id, key_name: row.name, scope: resource, ...actorOf(req) },
          });
        });
        return reply.status(201).send({ ...resource, key });
      },
    );

    app.get("/automation-keys", async (req) => {
      const rows = await ctx
        .db("automation_keys")
        .where({ tenant_id: req.apiPrincipal.tenantId })
        .whereNull("revoked_at")
        .orderBy("created_at", "asc")
        .select(COLUMNS);
      return { automation_keys: rows.map(present) };
    });

    app.patch<{ Params: { id: string }; Body: KeyBody }>(
      "/automation-keys/:id",
      { schema: { body: patchSchema } },
      async (req) => {
        const before = await findKey(ctx.db, req);
        const changes: Record<string, unknown> = await compileScope(
          ctx.db,
          req.apiPrincipal.tenantId,
          req.body,
        );
        if (req.body.name !== undefined) changes.name = req.body.name;
        if (req.body.rate_limit !== undefined) changes.rate_limit = req.body.rate_limit;
        const after = present({ ...before, ...changes });
        await ctx.db.transaction(async (trx) => {
          await trx("automation_keys").where({ id: before.id }).update(changes);
          await appendAuditEvent(trx, {
            tenantId: req.apiPrincipal.tenantId,
            eventType: "automation_key.updated",
            keyId: before.id,
            payload: {
              key_id: before.id,
              key_name: after.name,
              changed: Object.keys(changes).sort(),
              scope: after,
              ...actorOf(req),
            },
          });
        });
        return after;
      },
    );

    app.delete<{ Params: { id: string } }>("/automation-keys/:id", async (req, reply) => {
      const row = await findKey(ctx.db, req);
      await ctx.db.transaction(async (trx) => {
        await trx("automation_keys")
          .where({ id: row.id })
          .whereNull("revoked_at")
          .update({ revoked_at: Date.now() });
        await appendAuditEvent(trx, {
          tenantId: req.apiPrincipal.tenantId,
          eventType: "automation_key.revoked",
          keyId: row.id,
          payload: { key_id: row.id, key_name: row.name, ...actorOf(req) },
        });
      });
      return reply.status(204).send();
    });
  };
