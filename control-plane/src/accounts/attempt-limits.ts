// Limits on guessing: sign-in attempts per (account, IP), per IP and, slower,
// per account from anywhere (issue 30, finding 7), and device-code
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
  /**
   * Sign-ins naming one account from one IP: ten per 15 minutes. Per (account, IP),
   * so a stranger's wrong passwords never lock the person out of their own address.
   */
  signinAccountIp: { seconds: 900, limit: 10 },
  /**
   * Sign-ins naming one account from anywhere: a hundred an hour, the bound on
   * guessing spread over many addresses (~2,400 a day). Past it, only the right
   * password from an address the account signed in from before gets in
   * (KNOWN_ADDRESS_MS), so a spread-out guesser cannot lock its owner out there.
   */
  signinAccount: { seconds: 3600, limit: 100 },
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

/** How long an address an account signed in from stays known to it (the global limit's way through). */
export const KNOWN_ADDRESS_MS = 30 * 24 * 3600 * 1000;

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

/** Counts one attempt of one subject and says whether it is within the limit (the caller decides). */
export async function countOneAttempt(
  db: Knex,
  s: { label: string; limit: { seconds: number; limit: number } },
): Promise<{ allowed: boolean; retryAfterSeconds: number }> {
  const r = await countRequest(db, subjectId(s.label), s.limit.seconds, s.limit.limit);
  return { allowed: r.allowed, retryAfterSeconds: r.retryAfterSeconds };
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
