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
import { Transform } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";
import { subjectId } from "../accounts/attempt-limits.js";
import { countRequest } from "../auth/rate-limit.js";
import { RcError } from "../errors.js";
import { type RouteSpec, route } from "../http/route.js";
import type { Payload } from "./context.js";
import { recordDelivery, recordReplay } from "./deliveries.js";
import type { GitHubIntegration } from "./integration.js";

/** GitHub caps webhook payloads at 25 MB. */
export const WEBHOOK_BODY_LIMIT = 25 * 1024 * 1024;
/** GitHub gives up on a delivery after 10 s: a body still arriving then is not GitHub's. */
export const WEBHOOK_BODY_DEADLINE_MS = 10_000;
/** What a busy answer asks the sender to wait, in seconds. */
const BUSY_RETRY_AFTER_SECONDS = 5;

const SIGNATURE = /^sha256=([0-9a-f]{64})$/;

const header = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

/** Bodies being read before their signature is known, in this process. */
class BodySlots {
  private used = 0;
  constructor(private readonly max: number) {}

  /** A release function (idempotent), or undefined when every slot is taken. */
  take(): (() => void) | undefined {
    if (this.used >= this.max) return undefined;
    this.used++;
    let held = true;
    return () => {
      if (held) this.used--;
      held = false;
    };
  }
}

interface Reading {
  release: () => void;
  /** The HMAC of the whole body, once it has all arrived. */
  mac?: Buffer;
}

export const webhookRoutes = (github: GitHubIntegration | undefined): RouteSpec[] => {
  const slots = new BodySlots(github?.ctx.webhook.concurrentBodies ?? 1);
  const readings = new WeakMap<FastifyRequest, Reading>();

  /** Everything that can be refused before the body is read, then the body through the HMAC. */
  const admitBody = async (req: FastifyRequest, reply: FastifyReply, payload: NodeJS.ReadableStream) => {
    if (!github) throw new RcError("RC_ERR_GITHUB_UNCONFIGURED");
    if (!SIGNATURE.test(header(req.headers["x-hub-signature-256"]) ?? ""))
      throw new RcError("RC_ERR_WEBHOOK_SIGNATURE");
    const perIp = github.ctx.webhook.perIpPerMinute;
    const r = await countRequest(github.ctx.db, subjectId(`github-webhook-ip\n${req.ip}`), 60, perIp);
    if (!r.allowed) {
      reply.header("retry-after", String(r.retryAfterSeconds));
      req.log.warn({ ip: req.ip }, "github webhook: source over its requests a minute");
      throw new RcError(
        "RC_ERR_RATE_LIMITED",
        `more than ${perIp} webhook requests a minute from this address: retry in ${r.retryAfterSeconds} s`,
      );
    }
    const release = slots.take();
    if (!release) {
      reply.header("retry-after", String(BUSY_RETRY_AFTER_SECONDS));
      req.log.warn({ ip: req.ip }, "github webhook: every unverified body slot is taken");
      throw new RcError("RC_ERR_WEBHOOK_BUSY");
    }
    const reading: Reading = { release };
    readings.set(req, reading);
    reply.raw.once("close", release);
    const hmac = createHmac("sha256", github.app.config.webhookSecret);
    let received = 0;
    const out = new Transform({
      transform(chunk: Buffer, _enc, done) {
        hmac.update(chunk);
        received += chunk.length;
        // Fastify compares this with Content-Length and the body limit.
        (out as unknown as { receivedEncodedLength: number }).receivedEncodedLength = received;
        done(null, chunk);
      },
      flush(done) {
        clearTimeout(deadline);
        reading.mac = hmac.digest();
        done();
      },
    });
    const deadline = setTimeout(() => {
      release();
      payload.unpipe(out);
      out.destroy(
        new RcError(
          "RC_ERR_BAD_REQUEST",
          `the body did not arrive within ${WEBHOOK_BODY_DEADLINE_MS / 1000} s (GitHub's own limit)`,
        ),
      );
    }, WEBHOOK_BODY_DEADLINE_MS);
    out.once("close", () => clearTimeout(deadline));
    // Answered without reading the body (413 on its Content-Length, say): nothing waits for it now.
    reply.raw.once("close", () => clearTimeout(deadline));
    // Fastify stops listening once it has answered; an error after that must not crash the process.
    out.on("error", () => undefined);
    payload.once("error", (err) => out.destroy(err));
    payload.pipe(out);
    return out;
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
