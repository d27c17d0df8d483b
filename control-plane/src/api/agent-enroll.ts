// POST /api/agent/enroll — an agent trades a single-use, expiring join token
// (rjt_) for its long-lived credential (rag_, stored hashed) and the gateway URLs.
// Enrolling again under a name that exists rotates that server's credential.
import { randomUUID } from "node:crypto";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import type { ApiContext } from "./context.js";

// Not strict: agents of other versions may send fields this one does not know.
const bodySchema = z.object({
  join_token: z.string().min(1).max(256),
  hostname: z.string().max(255).optional(),
  agent_version: z.string().max(64).optional(),
});

interface JoinRow {
  id: string;
  tenant_id: string;
  server_name: string;
  expires_at: number;
  used_at: number | null;
}

export const enrollRoute =
  (ctx: ApiContext, gatewayUrls: () => string[]): FastifyPluginAsyncZod =>
  async (app) => {
    app.post("/api/agent/enroll", { schema: { body: bodySchema } }, async (req, reply) => {
      const { join_token: token, hostname, agent_version } = req.body;
      if (!token.startsWith("rjt_")) throw new RcError("RC_ERR_JOIN_TOKEN_INVALID");
      const credential = mintToken("rag_");
      const server = await ctx.db.transaction(async (trx) => {
        const jt = await trx("join_tokens")
          .where({ token_hash: sha256Hex(token) })
          .first<JoinRow | undefined>();
        if (!jt || jt.used_at !== null || Number(jt.expires_at) <= Date.now()) {
          throw new RcError("RC_ERR_JOIN_TOKEN_INVALID");
        }
        // The used_at guard makes the token single use even under a race.
        const claimed = await trx("join_tokens")
          .where({ id: jt.id, used_at: null })
          .update({ used_at: Date.now() });
        if (claimed !== 1) throw new RcError("RC_ERR_JOIN_TOKEN_INVALID");
        const existing = await trx("servers")
          .where({ tenant_id: jt.tenant_id, name: jt.server_name })
          .first<{ id: string } | undefined>("id");
        const id = existing?.id ?? randomUUID();
        const fields = {
          agent_credential_hash: sha256Hex(credential),
          hostname: hostname ?? null,
          agent_version: agent_version ?? null,
        };
        if (existing) await trx("servers").where({ id }).update(fields);
        else
          await trx("servers").insert({
            id,
            tenant_id: jt.tenant_id,
            name: jt.server_name,
            created_at: Date.now(),
            ...fields,
          });
        await trx("join_tokens").where({ id: jt.id }).update({ server_id: id });
        await appendAuditEvent(trx, {
          tenantId: jt.tenant_id,
          eventType: "agent.enrolled",
          serverId: id,
          payload: { server_id: id, server_name: jt.server_name, hostname: hostname ?? null, ip: req.ip },
        });
        return { id, name: jt.server_name };
      });
      return reply.status(201).send({
        server_id: server.id,
        server_name: server.name,
        agent_credential: credential,
        gateway_urls: gatewayUrls(),
      });
    });
  };
