// Waiting without fixed sleeps: poll a condition until it holds or a deadline passes. The
// polling itself is @relayctl/devkit's, shared with the benchmarks and make dev.
import { pollUntil } from "@relayctl/devkit";

export { type PollOptions, canConnect, pollUntil, waitForTcp } from "@relayctl/devkit";

/**
 * Rate-limit windows are whole minutes of the wall clock. A test that must stay
 * inside one window waits (polling the clock) until at least `needMs` of the
 * current minute is left, so its burst never straddles two windows.
 */
export function waitForMinuteRoom(needMs: number): Promise<true> {
  return pollUntil(async () => (60_000 - (Date.now() % 60_000) >= needMs ? true : undefined), {
    what: `${needMs} ms left in the current minute`,
    timeoutMs: 61_000,
    intervalMs: 100,
  });
}
