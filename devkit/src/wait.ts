// Waiting without fixed sleeps: poll a condition until it holds or a deadline passes.
import { connect } from "node:net";
import { setTimeout as delay } from "node:timers/promises";

export interface PollOptions {
  /** What is awaited, for the error message. */
  what: string;
  timeoutMs: number;
  intervalMs?: number;
}

/**
 * Calls `probe` until it returns something other than `undefined`, and returns that.
 * A probe that throws counts as "not yet" (a server that is restarting refuses connections);
 * the last value or error is reported when the deadline passes.
 */
export async function pollUntil<T>(
  probe: () => Promise<T | undefined> | T | undefined,
  opts: PollOptions,
): Promise<T> {
  const deadline = Date.now() + opts.timeoutMs;
  let last: unknown = "no attempt finished";
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
      last = "condition not met";
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      const why = last instanceof Error ? last.message : String(last);
      throw new Error(`timed out after ${opts.timeoutMs} ms waiting for ${opts.what} (last: ${why})`);
    }
    await delay(opts.intervalMs ?? 50);
  }
}

/** True when a TCP connection to host:port is accepted. */
export function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

export function waitForTcp(host: string, port: number, timeoutMs: number): Promise<true> {
  return pollUntil(async () => ((await canConnect(host, port)) ? true : undefined), {
    what: `tcp ${host}:${port}`,
    timeoutMs,
    intervalMs: 20,
  });
}

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
