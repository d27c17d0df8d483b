// Output for people and for scripts: --json prints the answer as JSON (one
// document on stdout); otherwise aligned tables and key/value blocks.
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(stripInternal(value), null, 2)}\n`);
}

function stripInternal(value: unknown): unknown {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const { _status, ...rest } = value as Record<string, unknown>;
    return rest;
  }
  return value;
}

const cell = (v: unknown): string =>
  v === null || v === undefined
    ? "-"
    : Array.isArray(v)
      ? v.join(",") || "-"
      : String(v).replace(/[\r\n\t]/g, " ");

/** Columns padded to the widest cell; `columns` are [header, field] pairs. */
export function printTable(rows: Record<string, unknown>[], columns: [string, string][]): void {
  const cells = rows.map((r) => columns.map(([, f]) => cell(r[f])));
  const widths = columns.map(([h], i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const line = (parts: string[]) =>
    `${parts.map((p, i) => (i === parts.length - 1 ? p : p.padEnd(widths[i]))).join("  ")}\n`;
  process.stdout.write(line(columns.map(([h]) => h)));
  for (const c of cells) process.stdout.write(line(c));
}

export function printFields(obj: Record<string, unknown>, fields?: string[]): void {
  const keys = (fields ?? Object.keys(obj)).filter((k) => !k.startsWith("_"));
  const width = Math.max(...keys.map((k) => k.length));
  for (const k of keys) {
    const v = obj[k];
    const shown = v !== null && typeof v === "object" && !Array.isArray(v) ? JSON.stringify(v) : cell(v);
    process.stdout.write(`${k.padEnd(width)}  ${shown}\n`);
  }
}

/** JSON for scripts, else the human form. */
export function emit(json: boolean | undefined, value: unknown, human: () => void): void {
  if (json) printJson(value);
  else human();
}
