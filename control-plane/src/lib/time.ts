// Times are stored as epoch milliseconds (portable across MySQL and SQLite) and
// shown as ISO 8601 UTC.
export const nowMs = (): number => Date.now();
export const iso = (ms: number | null | undefined): string | null =>
  ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString();
