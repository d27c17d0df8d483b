// POST /webhooks/gitlab/{connection_id} and /webhooks/gitea/{connection_id}
// (Gitea and Forgejo): the forges' deliveries. The connection in the URL names
// the tenant; its secret proves the sender, checked as GitHub's is
// (github/webhook-route.ts), nothing recorded until then:
// - GitLab sends the secret itself as X-Gitlab-Token: its SHA-256 is compared
//   (constant time) with the stored one before a byte of the body is read;
// - Gitea/Forgejo sign the raw body (X-Gitea-Signature / X-Forgejo-Signature,
//   hex HMAC-SHA256): its form is checked before the body is read, the digest
//   as it streams.
// The same bounds on unverified bodies as GitHub's (per-IP requests a minute,
// concurrent bodies, 10 s, 25 MB). A verified delivery is recorded and answered
// 202 at once, then processed from the record; a redelivery (same delivery id,
// X-Gitlab-Event-UUID or X-Gitea-Delivery / X-Forgejo-Delivery) is 202 and does nothing again,
// and so is a Gitea/Forgejo signed body replayed under another delivery id.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { RcError } from "../errors.js";
import { WEBHOOK_BODY_DEADLINE_MS, WEBHOOK_BODY_LIMIT } from "../github/webhook-route.js";
import { type RouteSpec, route } from "../http/route.js";
import { open } from "../registry/crypto.js";
import { BodySlots, type Reading, admitSender, boundedBody } from "../webhooks/bounded-body.js";
import { type ConnectionRow, connectionById, receiverOf, sha256Hex } from "./connections.js";
import type { ForgeContext } from "./context.js";
import { recordForgeDelivery, recordForgeReplay } from "./deliveries.js";

const HEX_SIGNATURE = /^(?:sha256=)?([0-9a-f]{64})$/;

const header = (req: FastifyRequest, ...names: string[]) => {
  for (const n of names) {
    const v = req.headers[n];
    const one = Array.isArray(v) ? v[0] : v;
    if (one) return one;
  }
  return undefined;
};

const giteaSignature = (req: FastifyRequest) =>
  HEX_SIGNATURE.exec(header(req, "x-forgejo-signature", "x-gitea-signature") ?? "")?.[1];

interface Admitted extends Reading {
  connection: ConnectionRow;
}

export const forgeWebhookRoutes = (ctx: ForgeContext, nudge: () => void): RouteSpec[] => {
  const slots = new BodySlots(ctx.webhook.concurrentBodies);
  const admitted = new WeakMap<FastifyRequest, Admitted>();

  /** The connection the URL names, once the sender's proof that can be had before the body holds. */
  const admitConnection = async (req: FastifyRequest, receiver: "gitlab" | "gitea") => {
    const id = (req.params as { connection_id?: string }).connection_id ?? "";
    // An unknown URL and a wrong secret get the same answer.
    const c = await connectionById(ctx.db, id);
    if (!c || receiverOf(c.kind) !== receiver) throw new RcError("RC_ERR_FORGE_WEBHOOK_SECRET");
    if (receiver === "gitlab") {
      const token = header(req, "x-gitlab-token") ?? "";
      const ok =
        token.length > 0 &&
        timingSafeEqual(
          Buffer.from(sha256Hex(token), "hex"),
          Buffer.from(c.webhook_secret_sha256 ?? "", "hex"),
        );
      if (!ok) throw new RcError("RC_ERR_FORGE_WEBHOOK_SECRET");
    } else if (!giteaSignature(req)) throw new RcError("RC_ERR_FORGE_WEBHOOK_SECRET");
    return c;
  };
  const giteaSecret = (c: ConnectionRow) => {
    if (!ctx.masterKey) throw new RcError("RC_ERR_MASTER_KEY_UNSET");
    return open(ctx.masterKey, c.webhook_secret_sealed ?? "");
  };

  /** The connection and the sender's proof, before the body is read; then the body. */
  const admitBody =
    (receiver: "gitlab" | "gitea") =>
    async (req: FastifyRequest, reply: FastifyReply, payload: NodeJS.ReadableStream) => {
      // The per-IP bound first, so guessing connections or secrets is bounded too; the
      // body slot taken here is given back when the sender proves nothing.
      const release = await admitSender(ctx.db, req, reply, slots, ctx.webhook.perIpPerMinute, "forge");
      try {
        const c = await admitConnection(req, receiver);
        const hmac = receiver === "gitea" ? createHmac("sha256", giteaSecret(c)) : undefined;
        const reading: Admitted = { release, connection: c };
        admitted.set(req, reading);
        return boundedBody(payload, reply, reading, hmac, WEBHOOK_BODY_DEADLINE_MS, "the forge's");
      } catch (err) {
        release();
        throw err;
      }
    };

  const receive = (receiver: "gitlab" | "gitea") => async (req: FastifyRequest, reply: FastifyReply) => {
    const raw = req.body as Buffer | undefined;
    const a = admitted.get(req);
    if (!a || !Buffer.isBuffer(raw) || raw.length === 0) throw new RcError("RC_ERR_FORGE_WEBHOOK_SECRET");
    if (receiver === "gitea") {
      const given = giteaSignature(req);
      if (!a.mac || !given || !timingSafeEqual(a.mac, Buffer.from(given, "hex")))
        throw new RcError("RC_ERR_FORGE_WEBHOOK_SECRET");
    }
    // Verified: it no longer counts against the bodies of unknown senders.
    a.release();
    const event =
      receiver === "gitlab" ? header(req, "x-gitlab-event") : header(req, "x-forgejo-event", "x-gitea-event");
    const id =
      receiver === "gitlab"
        ? header(req, "x-gitlab-event-uuid")
        : header(req, "x-forgejo-delivery", "x-gitea-delivery");
    if (!event || !id || id.length > 64)
      throw new RcError(
        "RC_ERR_BAD_REQUEST",
        receiver === "gitlab"
          ? "X-Gitlab-Event and X-Gitlab-Event-UUID are required"
          : "X-Gitea-Event (or X-Forgejo-Event) and X-Gitea-Delivery (or X-Forgejo-Delivery) are required",
      );
    let payload: unknown;
    try {
      payload = JSON.parse(raw.toString("utf8"));
    } catch {
      throw new RcError("RC_ERR_BAD_REQUEST", "the delivery's body is not JSON");
    }
    if (payload === null || typeof payload !== "object" || Array.isArray(payload))
      throw new RcError("RC_ERR_BAD_REQUEST", "the delivery's body is not a JSON object");
    const p = payload as Record<string, unknown>;
    const attrs = p.object_attributes as Record<string, unknown> | undefined;
    const action = receiver === "gitlab" ? attrs?.action : p.action;
    const delivery = {
      connectionId: a.connection.id,
      tenantId: a.connection.tenant_id,
      id,
      event: event.slice(0, 64),
      action: typeof action === "string" ? action.slice(0, 64) : null,
      payload: raw,
    };
    const recorded = await recordForgeDelivery(ctx.db, delivery, receiver === "gitea");
    if (recorded === "recorded") nudge();
    // A replay is answered like a redelivery: it did nothing, and says no more.
    else if (recorded !== "redelivery")
      await recordForgeReplay(ctx.db, req.log, delivery, recorded.replayOf, req.ip);
    return reply.status(202).send({ delivery_id: id, duplicate: recorded !== "recorded" });
  };

  return (["gitlab", "gitea"] as const).map((receiver) =>
    route({
      method: "POST",
      url: `/webhooks/${receiver}/:connection_id`,
      access: {
        public:
          receiver === "gitlab"
            ? "the connection's secret as X-Gitlab-Token, its SHA-256 compared before the body is read (with the per-IP and concurrent-body bounds)"
            : "X-Gitea-Signature or X-Forgejo-Signature, HMAC-SHA256 of the raw body with the connection's secret: its form checked before the body is read (with the per-IP and concurrent-body bounds), its HMAC as the body streams",
      },
      tag: "forges",
      accepts: "raw-json",
      options: { bodyLimit: WEBHOOK_BODY_LIMIT, preParsing: admitBody(receiver) },
      handler: receive(receiver),
    }),
  );
};
