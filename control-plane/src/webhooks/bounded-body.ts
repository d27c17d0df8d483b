// Reading a webhook's body before anything proves who sent it (GitHub's
// /webhooks/github, GitLab's and Gitea's /webhooks/<kind>/<id>): a bounded
// number of bodies at once per process, each under a deadline, streamed
// through the sender's HMAC when it signs the body so the digest is ready
// when the last byte is.
import type { Hmac } from "node:crypto";
import { Transform } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { subjectId } from "../accounts/attempt-limits.js";
import { countRequest } from "../auth/rate-limit.js";
import { RcError } from "../errors.js";

/** Bodies being read before their signature is known, in this process. */
export class BodySlots {
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

export interface Reading {
  release: () => void;
  /** The HMAC of the whole body, once it has all arrived (when one was asked for). */
  mac?: Buffer;
}

/**
 * The stream Fastify parses instead of `payload`: it gives up past `deadlineMs`
 * (`who` names the sender's own limit in the error) and fills `reading.mac`.
 */
export function boundedBody(
  payload: NodeJS.ReadableStream,
  reply: FastifyReply,
  reading: Reading,
  hmac: Hmac | undefined,
  deadlineMs: number,
  who: string,
): Transform {
  reply.raw.once("close", reading.release);
  let received = 0;
  const out = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hmac?.update(chunk);
      received += chunk.length;
      // Fastify compares this with Content-Length and the body limit.
      (out as unknown as { receivedEncodedLength: number }).receivedEncodedLength = received;
      done(null, chunk);
    },
    flush(done) {
      clearTimeout(deadline);
      if (hmac) reading.mac = hmac.digest();
      done();
    },
  });
  const deadline = setTimeout(() => {
    reading.release();
    payload.unpipe(out);
    out.destroy(
      new RcError(
        "RC_ERR_BAD_REQUEST",
        `the body did not arrive within ${deadlineMs / 1000} s (${who} own limit)`,
      ),
    );
  }, deadlineMs);
  out.once("close", () => clearTimeout(deadline));
  // Answered without reading the body (413 on its Content-Length, say): nothing waits for it now.
  reply.raw.once("close", () => clearTimeout(deadline));
  // Fastify stops listening once it has answered; an error after that must not crash the process.
  out.on("error", () => undefined);
  payload.once("error", (err) => out.destroy(err));
  payload.pipe(out);
  return out;
}

/** What a busy answer asks the sender to wait, in seconds. */
const BUSY_RETRY_AFTER_SECONDS = 5;

/**
 * The bounds before an unverified body is read: the source address's requests
 * a minute (429), then a free body slot (503 busy); the slot's release.
 */
export async function admitSender(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
  slots: BodySlots,
  perIpPerMinute: number,
  /** Names the counter and the log lines: `github`, `forge`. */
  sender: string,
): Promise<() => void> {
  const r = await countRequest(db, subjectId(`${sender}-webhook-ip\n${req.ip}`), 60, perIpPerMinute);
  if (!r.allowed) {
    reply.header("retry-after", String(r.retryAfterSeconds));
    req.log.warn({ ip: req.ip }, `${sender} webhook: source over its requests a minute`);
    throw new RcError(
      "RC_ERR_RATE_LIMITED",
      `more than ${perIpPerMinute} webhook requests a minute from this address: retry in ${r.retryAfterSeconds} s`,
    );
  }
  const release = slots.take();
  if (!release) {
    reply.header("retry-after", String(BUSY_RETRY_AFTER_SECONDS));
    req.log.warn({ ip: req.ip }, `${sender} webhook: every unverified body slot is taken`);
    throw new RcError("RC_ERR_WEBHOOK_BUSY");
  }
  return release;
}
