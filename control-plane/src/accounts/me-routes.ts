// The signed-in person's own credentials, for the dashboard's Account page:
// GET/DELETE /api/me/sessions (web sign-ins) and GET/DELETE /api/me/grants (CLI
// and MCP logins: one OAuth token family each, revoked whole). A person may end
// any of their own, never anyone else's (another person's id is a 404); an API
// key is no person (403). Each revocation is audited with the person as actor
// in the same transaction.
import type { FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { z } from "zod";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { isUuid } from "../http/validation.js";
import { iso } from "../lib/time.js";
import { findClient } from "../oauth/clients.js";
import { revokeFamily } from "../oauth/tokens.js";
import { SESSION_COOKIE, revokeSession, setCookie } from "./sessions.js";
import { describeUserAgent } from "./user-agent.js";
import { userActor } from "./users.js";

const params = z.object({ id: z.string() });

function personOf(req: FastifyRequest) {
  const { user, tenantId } = req.principal;
  if (!user) throw new RcError("RC_ERR_PERSON_ONLY");
  return { user, tenantId };
}

/** The person's OAuth token families with a live token, newest first. */
async function liveGrants(db: Knex, userId: string) {
  const rows: { family_id: string; client_id: string; created_at: number; expires_at: number }[] = await db(
    "oauth_tokens",
  )
    .where({ user_id: userId })
    .whereNull("revoked_at")
    .where("expires_at", ">", Date.now())
    .groupBy("family_id", "client_id")
    .select(
      "family_id",
      "client_id",
      db.raw("MIN(created_at) AS created_at"),
      db.raw("MAX(expires_at) AS expires_at"),
    )
    .orderByRaw("MIN(created_at) DESC");
  return rows;
}

// Every person manages their own logins and grants, whatever their role.
const access = { credentials: MANAGEMENT, role: "viewer" } as const;

export function meRoutes(ctx: ApiContext): RouteSpec[] {
  const { db } = ctx;
  return [
    route({
      method: "GET",
      url: "/api/me/sessions",
      access,
      tag: "management",
      handler: async (req) => {
        const { user } = personOf(req);
        const current = req.principal.session?.id;
        const rows: {
          id: string;
          created_at: number;
          expires_at: number;
          ip: string | null;
          user_agent: string | null;
          last_used_at: number | null;
        }[] = await db("web_sessions")
          .where({ user_id: user.id })
          .whereNull("revoked_at")
          .where("expires_at", ">", Date.now())
          .orderBy("created_at", "desc")
          .select("id", "created_at", "expires_at", "ip", "user_agent", "last_used_at");
        return {
          sessions: rows.map((r) => ({
            id: r.id,
            created_at: iso(Number(r.created_at)),
            expires_at: iso(Number(r.expires_at)),
            // To the minute (auth/last-use.ts); a session from before it was recorded: its sign-in.
            last_used_at: iso(Number(r.last_used_at ?? r.created_at)),
            ip: r.ip,
            device: describeUserAgent(r.user_agent),
            user_agent: r.user_agent,
            current: r.id === current,
          })),
        };
      },
    }),

    route({
      method: "DELETE",
      url: "/api/me/sessions/:id",
      access,
      tag: "management",
      schema: { params },
      handler: async (req, reply) => {
        const { user, tenantId } = personOf(req);
        const id = req.params.id.toLowerCase();
        const live = isUuid(id)
          ? await db("web_sessions")
              .where({ id, user_id: user.id })
              .whereNull("revoked_at")
              .where("expires_at", ">", Date.now())
              .first("id")
          : undefined;
        if (!live) throw new RcError("RC_ERR_WEB_SESSION_NOT_FOUND", `session '${req.params.id}' not found`);
        const current = id === req.principal.session?.id;
        await db.transaction(async (trx) => {
          await revokeSession(trx, id);
          await appendAuditEvent(trx, {
            tenantId,
            eventType: "auth.session_revoked",
            keyId: user.id,
            payload: { ...userActor(user, req.ip), session_id: id, current },
          });
        });
        // Ending the session this request came with signs this browser out.
        if (current) setCookie(req, reply, SESSION_COOKIE, "", 0);
        return reply.status(204).send();
      },
    }),

    route({
      method: "GET",
      url: "/api/me/grants",
      access,
      tag: "management",
      handler: async (req) => {
        const { user } = personOf(req);
        const grants = [];
        for (const g of await liveGrants(db, user.id)) {
          const client = await findClient(db, g.client_id);
          grants.push({
            id: g.family_id,
            client_id: g.client_id,
            client_name: client?.name ?? g.client_id,
            created_at: iso(Number(g.created_at)),
            expires_at: iso(Number(g.expires_at)),
          });
        }
        return { grants };
      },
    }),

    route({
      method: "DELETE",
      url: "/api/me/grants/:id",
      access,
      tag: "management",
      schema: { params },
      handler: async (req, reply) => {
        const { user, tenantId } = personOf(req);
        const id = req.params.id.toLowerCase();
        const grant = isUuid(id)
          ? (await liveGrants(db, user.id)).find((g) => g.family_id === id)
          : undefined;
        if (!grant)
          throw new RcError("RC_ERR_GRANT_NOT_FOUND", `CLI or MCP login '${req.params.id}' not found`);
        await db.transaction(async (trx) => {
          const revoked = await revokeFamily(trx, id);
          await appendAuditEvent(trx, {
            tenantId,
            eventType: "oauth.grant_revoked",
            keyId: user.id,
            payload: {
              ...userActor(user, req.ip),
              family_id: id,
              client_id: grant.client_id,
              tokens_revoked: revoked,
            },
          });
        });
        return reply.status(204).send();
      },
    }),
  ];
}
