// POST /webhooks/github: GitHub's deliveries to the App. Anyone can post here,
// so nothing is read until it could be GitHub's (issue 30, finding 2):
// - before a byte of the body is read (preParsing): a missing or malformed
//   X-Hub-Signature-256 is 401, a source IP past its requests a minute is 429,
//   and past RELAYCTL_GITHUB_WEBHOOK_CONCURRENT_BODIES bodies being read at
//   once (per api process) it is 503 with Retry-After;
// - the body streams through an HMAC-SHA256 with the App's webhook secret, must
//   arrive within GitHub's own 10 s and is capped at GitHub's 25 MB; the
//   digest is compared (constant time) with the header before anything else,
//   and only those verified bytes are parsed and recorded.
// A good one is recorded (deliveries.ts) and answered 202 at once — GitHub
// gives up after 10 s, and a restart must lose nothing — then processed from
// the record. A redelivery (same X-GitHub-Delivery) is 202 and does nothing
// again, and so is a replay: the same body under another delivery id.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { RcError } from "../errors.js";
import { type RouteSpec, route } from "../http/route.js";
import type { Payload } from "./context.js";
import { recordDelivery, recordReplay } from "./deliveries.js";
import type { GitHubIntegration } from "./integration.js";
import { BodySlots, type Reading, admitSender, boundedBody } from "../webhooks/bounded-body.js";

/** GitHub caps webhook payloads at 25 MB. */
export const WEBHOOK_BODY_LIMIT = 25 * 1024 * 1024;
/** GitHub gives up on a delivery after 10 s: a body still arriving then is not GitHub's. */
export const WEBHOOK_BODY_DEADLINE_MS = 10_000;

const SIGNATURE = /^sha256=([0-9a-f]{64})$/;

const header = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

export const webhookRoutes = (github: GitHubIntegration | undefined): RouteSpec[] => {
  const slots = new BodySlots(github?.ctx.webhook.concurrentBodies ?? 1);
  const readings = new WeakMap<FastifyRequest, Reading>();

  /** Everything that can be refused before the body is read, then the body through the HMAC. */
  const admitBody = async (req: FastifyRequest, reply: FastifyReply, payload: NodeJS.ReadableStream) => {
    if (!github) throw new RcError("RC_ERR_GITHUB_UNCONFIGURED");
    if (!SIGNATURE.test(header(req.headers["x-hub-signature-256"]) ?? ""))
      throw new RcError("RC_ERR_WEBHOOK_SIGNATURE");
    const release = await admitSender(
      github.ctx.db,
      req,
      reply,
      slots,
      github.ctx.webhook.perIpPerMinute,
      "github",
    );
    const reading: Reading = { release };
    readings.set(req, reading);
    const hmac = createHmac("sha256", github.app.config.webhookSecret);
    return boundedBody(payload, reply, reading, hmac, WEBHOOK_BODY_DEADLINE_MS, "GitHub's");
  };

  return [
    route({
      method: "POST",
      url: "/webhooks/github",
      access: {
        public:
          "GitHub's X-Hub-Signature-256 over the raw body: its form checked before the body is read (with the per-IP and concurrent-body bounds), its HMAC as the body streams",
      },
      tag: "github",
      accepts: "raw-json",
      options: { bodyLimit: WEBHOOK_BODY_LIMIT, preParsing: admitBody },
      handler: async (req, reply) => {
        if (!github) throw new RcError("RC_ERR_GITHUB_UNCONFIGURED");
        const raw = req.body as Buffer | undefined;
        const reading = readings.get(req);
        const given = SIGNATURE.exec(header(req.headers["x-hub-signature-256"]) ?? "")?.[1];
        if (
          !Buffer.isBuffer(raw) ||
          raw.length === 0 ||
          !reading?.mac ||
          !given ||
          !timingSafeEqual(reading.mac, Buffer.from(given, "hex"))
        )
          throw new RcError("RC_ERR_WEBHOOK_SIGNATURE");
        // Verified: it no longer counts against the bodies of unknown senders.
        reading.release();
        const event = header(req.headers["x-github-event"]);
        const id = header(req.headers["x-github-delivery"]);
        if (!event || !id || id.length > 64)
          throw new RcError("RC_ERR_BAD_REQUEST", "X-GitHub-Event and X-GitHub-Delivery are required");
        let payload: Payload;
        try {
          payload = JSON.parse(raw.toString("utf8"));
        } catch {
          throw new RcError("RC_ERR_BAD_REQUEST", "the delivery's body is not JSON");
        }
        // Every GitHub event is a JSON object; anything else would fail below (a 500).
        if (payload === null || typeof payload !== "object" || Array.isArray(payload))
          throw new RcError("RC_ERR_BAD_REQUEST", "the delivery's body is not a JSON object");
        const idOf = (o: unknown) => {
          const n = Number((o as { id?: unknown } | null | undefined)?.id);
          return Number.isSafeInteger(n) && n > 0 ? n : null;
        };
        const delivery = {
          id,
          event: event.slice(0, 64),
          action: typeof payload.action === "string" ? payload.action.slice(0, 64) : null,
          installationId: idOf(payload.installation),
          repositoryId: idOf(payload.repository),
          payload: raw,
        };
        const recorded = await recordDelivery(github.ctx.db, delivery);
        if (recorded.result === "recorded") github.processor.nudge();
        // A replay is answered like a redelivery: it did nothing, and says no more.
        if (recorded.result === "replay")
          await recordReplay(github.ctx.db, req.log, delivery, recorded, req.ip);
        return reply.status(202).send({ delivery_id: id, duplicate: recorded.result !== "recorded" });
      },
    }),
  ];
};
