// What a run found, as rows for the log table and the job summary, the step's
// outputs, and whether the step fails. Pure: the runner calls live in main.ts.
import type { SyncError, SyncResponse } from "./client.js";

export interface RunOutcome {
  sessionId: string;
  sync: SyncResponse;
  unmatched: string[];
  force: boolean;
}

export const TABLE_HEADER = ["service", "status", "domains", "signature", "detail"];

export function reportRows(o: RunOutcome): string[][] {
  const rows = o.sync.results.map((r) => [
    r.container_name,
    r.status,
    r.synced_fqdns.join(", "),
    r.signature_hash.slice(0, 19),
    r.reason ?? "",
  ]);
  for (const e of o.sync.errors) rows.push([e.container_name, "error", "", "", e.reason]);
  for (const name of o.unmatched) rows.push([name, "unmatched", "", "", "no application links this name"]);
  return rows;
}

/** A fixed-width text table for the step log. */
export function formatTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]))
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

export function countByStatus(o: RunOutcome): Record<string, number> {
  const counts: Record<string, number> = { synced: 0, noop: 0, drift_recovered: 0, conflict: 0 };
  for (const r of o.sync.results) counts[r.status] = (counts[r.status] ?? 0) + 1;
  return counts;
}

/** The step's outputs (action.yml lists them). */
export function outputsOf(o: RunOutcome): Record<string, string> {
  const counts = countByStatus(o);
  return {
    session_id: o.sessionId,
    results: JSON.stringify(o.sync.results),
    errors: JSON.stringify(o.sync.errors),
    unmatched: JSON.stringify(o.unmatched),
    synced: String(counts.synced),
    noop: String(counts.noop),
    drift_recovered: String(counts.drift_recovered),
    conflicts: String(counts.conflict),
  };
}

/** Why the step fails, or undefined when it succeeds. */
export function failureOf(o: RunOutcome): string | undefined {
  const problems: string[] = [];
  const conflicts = o.sync.results.filter((r) => r.status === "conflict");
  if (conflicts.length > 0 && !o.force) {
    const names = conflicts.map((r) => r.container_name).join(", ");
    problems.push(
      `${conflicts.length} conflict(s) (${names}); rerun with force: true to override the 30-second guard`,
    );
  }
  if (o.sync.errors.length > 0) {
    problems.push(`${o.sync.errors.length} service(s) not synced (${names(o.sync.errors)})`);
  }
  return problems.length > 0 ? problems.join("; ") : undefined;
}

function names(errors: SyncError[]): string {
  return errors.map((e) => `${e.container_name}: ${e.reason}`).join("; ");
}
