// POST /api/servers/join-tokens — the dashboard's "Add server": a fresh single-use
// join token (auth/agent-credentials.ts, the same code as `admin create-join-token`)
// with the two commands that use it: the one-line installer and, for an agent
// already installed, `relayctl-agent enroll`. Owner only;
// audited with the person as the actor; the token is shown here once.
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { SERVER_NAME_PATTERN, issueJoinToken } from "../../auth/agent-credentials.js";
import { auditActor } from "../../auth/principal.js";
import type { AuditActor } from "../../auth/automation-key-service.js";
import { issuerOf } from "../../oauth/routes.js";
import { RcError } from "../../errors.js";
import { bundleSigner } from "../../install/signing.js";
import type { ApiContext } from "../../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../../http/route.js";

const JOIN_TOKEN_TTL_MINUTES = 60;

const body = z
  .strictObject({
    name: z
      .string()
      .regex(SERVER_NAME_PATTERN, "1-128 characters of letters, digits, '.', '_' or '-'")
      .optional(),
  })
  .optional();

/**
 * Plain http to an address that is not this machine (issue 30, finding 11): the
 * install command pipes what it fetches into `sudo sh`, and anyone on the way
 * could change it. Loopback is dev and the tests.
 */
export function insecureInstallUrl(url: string): boolean {
  const u = new URL(url);
  if (u.protocol !== "http:") return false;
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  const loopback =
    host === "localhost" || host.endsWith(".localhost") || /^127\./.test(host) || host === "::1";
  return !loopback;
}

/** A word for a POSIX shell: as is when plain, else single-quoted. */
export function shellWord(s: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

export const joinTokensRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "POST",
    url: "/api/servers/join-tokens",
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    schema: { body },
    handler: async (req, reply) => {
      const p = req.principal;
      const serverName = req.body?.name ?? `server-${randomBytes(3).toString("hex")}`;
      const who = auditActor(p, req.ip) as AuditActor;
      const url = issuerOf(ctx, req);
      // Refused before a token is made: there is no safe command to hand it out with.
      if (insecureInstallUrl(url)) throw new RcError("RC_ERR_INSECURE_INSTALL_URL");
      const t = await issueJoinToken(
        ctx.db,
        { tenantId: p.tenantId, serverName, ttlMinutes: JOIN_TOKEN_TTL_MINUTES },
        who,
      );
      const base = shellWord(url);
      // The installer checks the bundle against this key, given here and not by the script.
      const key = bundleSigner(ctx.config).publicKey;
      return reply.status(201).send({
        token: t.token,
        server_name: t.serverName,
        expires_at: t.expiresAt,
        install_command: `curl -fsSL ${base}/install.sh | sudo sh -s -- --token ${t.token} --signing-key ${key}`,
        enroll_command: `relayctl-agent enroll --url ${base} --token ${t.token}`,
      });
    },
  }),
];
