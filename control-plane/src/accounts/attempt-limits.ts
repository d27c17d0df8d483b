// Limits on guessing: sign-in attempts per account and per IP, and device-code
// entries per user and per IP, counted in the same database windows as key
// rate limits (auth/rate-limit.ts), so they hold across api instances. The
// counter table is keyed by a UUID: each subject gets a stable UUID-shaped id
// (SHA-256 of its label), which never collides with a key's random id.
import { createHash } from "node:crypto";
import type { Knex } from "knex";
import { countRequest } from "../auth/rate-limit.js";
import { RcError } from "../errors.js";

/** Window and limit of each kind of attempt. */
export const LIMITS = {
  /** Sign-ins naming one account: ten per 15 minutes (a guesser gets ~1,000 a day). */
  signinAccount: { seconds: 900, limit: 10 },
  /** Sign-ins from one IP, whatever the account (spraying many accounts). */
  signinIp: { seconds: 900, limit: 50 },
  /** User codes typed on /device by one signed-in user. */
  deviceCodeUser: { seconds: 900, limit: 10 },
  /** User codes typed on /device from one IP. */
  deviceCodeIp: { seconds: 900, limit: 30 },
  /** Device authorizations started from one IP (each holds a user code while it lives). */
  deviceStartIp: { seconds: 900, limit: 300 },
  /** OAuth clients registered from one IP (RFC 7591 registration is open to anyone). */
  registerIp: { seconds: 3600, limit: 30 },
} as const;

export function subjectId(label: string): string {
  const h = createHash("sha256").update(`relayctl attempt subject\n${label}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * Counts one attempt for every subject; 429 (with retry-after seconds) at the
 * first exhausted. Counted before the guess is checked, so parallel guesses
 * cannot slip past the limit; a guess that turns out right is refunded.
 */
export async function countAttempt(
  db: Knex,
  subjects: { label: string; limit: { seconds: number; limit: number } }[],
): Promise<void> {
  for (const s of subjects) {
    const r = await countRequest(db, subjectId(s.label), s.limit.seconds, s.limit.limit);
    if (!r.allowed)
      throw new RcError("RC_ERR_SIGNIN_LIMITED", `too many attempts: retry in ${r.retryAfterSeconds} s`, {
        extra: { retry_after: r.retryAfterSeconds },
      });
  }
}

/** Gives back the attempt of a guess that was right (a correct code or password is no guessing). */
export async function refundAttempt(db: Knex, subjects: { label: string; limit: { seconds: number } }[]) {
  const now = Date.now();
  for (const s of subjects) {
    const windowMs = s.limit.seconds * 1000;
    await db("rate_limit_counters")
      .where({
        key_id: subjectId(s.label),
        window_seconds: s.limit.seconds,
        window_start: Math.floor(now / windowMs) * windowMs,
      })
      .where("count", ">", 0)
      .decrement("count", 1);
  }
}
