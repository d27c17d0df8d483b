// Output previews for listings (GET /operations?run_id=, GET /api/audit). A
// stored stdout or stderr is up to 1 MiB, and a page of them would be a
// response of hundreds of MB; a listing carries its head and tail instead, with
// the full size and a flag, and GET /operations/{id} serves the whole. The
// preview is cut in SQL, so the full columns never leave the database.
import type { Knex } from "knex";
import { isSqlite } from "../db/knex.js";

/** Characters kept from each end of a truncated output. */
export const PREVIEW_CHARS = 2048;

type Stream = "stdout" | "stderr";

/** Select expressions: `<s>_head` (up to 2 x PREVIEW_CHARS), `<s>_tail` (when longer), `<s>_chars`, `<s>_bytes`. */
export function previewColumns(db: Knex, alias: string): Knex.Raw[] {
  const sqlite = isSqlite(db);
  const chars = (c: string) => (sqlite ? `LENGTH(${c})` : `CHAR_LENGTH(${c})`);
  const bytes = (c: string) => (sqlite ? `LENGTH(CAST(${c} AS BLOB))` : `LENGTH(${c})`);
  const whole = 2 * PREVIEW_CHARS;
  return (["stdout", "stderr"] as Stream[]).flatMap((s) => {
    const c = `${alias}.${s}`;
    return [
      db.raw(`SUBSTR(${c}, 1, ${whole}) AS ${s}_head`),
      db.raw(
        `CASE WHEN ${chars(c)} > ${whole} THEN SUBSTR(${c}, ${chars(c)} - ${PREVIEW_CHARS - 1}) END AS ${s}_tail`,
      ),
      db.raw(`${chars(c)} AS ${s}_chars`),
      db.raw(`${bytes(c)} AS ${s}_bytes`),
    ];
  });
}

export interface PreviewRow {
  stdout_head: string | null;
  stdout_tail: string | null;
  stdout_chars: number | null;
  stdout_bytes: number | null;
  stderr_head: string | null;
  stderr_tail: string | null;
  stderr_chars: number | null;
  stderr_bytes: number | null;
}

/**
 * `<s>` is the whole output when it is short, else its first PREVIEW_CHARS
 * characters with `<s>_tail` its last PREVIEW_CHARS; `<s>_bytes` is the full
 * size in UTF-8 bytes and `<s>_truncated` says the middle is left out.
 */
export function presentPreview(row: PreviewRow, fallbackStderr: string | null = null) {
  const stream = (s: Stream) => {
    const truncated = row[`${s}_tail`] !== null;
    const head = row[`${s}_head`] ?? "";
    return {
      [s]: truncated ? head.slice(0, PREVIEW_CHARS) : head,
      [`${s}_tail`]: truncated ? row[`${s}_tail`] : null,
      [`${s}_bytes`]: Number(row[`${s}_bytes`] ?? 0),
      [`${s}_truncated`]: truncated,
    };
  };
  const stderr =
    row.stderr_head === null && fallbackStderr !== null
      ? {
          stderr: fallbackStderr,
          stderr_tail: null,
          stderr_bytes: Buffer.byteLength(fallbackStderr),
          stderr_truncated: false,
        }
      : stream("stderr");
  return { ...stream("stdout"), ...stderr };
}
