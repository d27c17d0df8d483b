// Recognises "the database cannot be reached right now" among driver errors, by
// code, so the api answers 503 (retry later) instead of 500 (a bug).
const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "PROTOCOL_CONNECTION_LOST",
  "PROTOCOL_SEQUENCE_TIMEOUT",
  "ER_CON_COUNT_ERROR",
  "ER_SERVER_SHUTDOWN",
  "SQLITE_BUSY",
  "SQLITE_LOCKED",
]);

export function isStoreUnavailable(err: unknown): boolean {
  for (
    let e = err as { code?: string; name?: string; cause?: unknown } | undefined;
    e;
    e = e.cause as typeof e
  ) {
    if (e.name === "KnexTimeoutError") return true; // no pooled connection could be had
    if (e.code && UNREACHABLE_CODES.has(e.code)) return true;
    if (e === e.cause) break;
  }
  return false;
}
