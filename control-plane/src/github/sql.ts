// SQL helpers of the GitHub module shared by its stores.

/** A unique-key violation on MariaDB/MySQL or SQLite. */
export function isDuplicate(err: unknown): boolean {
  const code = (err as { code?: string }).code ?? "";
  return code === "ER_DUP_ENTRY" || code.startsWith("SQLITE_CONSTRAINT");
}
