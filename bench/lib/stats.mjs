// Percentiles and the printed table of a latency bench.

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

const round = (x, digits = 3) => (Number.isFinite(x) ? Number(x.toFixed(digits)) : null);

/** Summary of samples in milliseconds. */
export function summarize(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = sorted.reduce((s, x) => s + x, 0) / sorted.length;
  return {
    n: sorted.length,
    p50_ms: round(percentile(sorted, 50)),
    p99_ms: round(percentile(sorted, 99)),
    mean_ms: round(mean),
    min_ms: round(sorted[0]),
    max_ms: round(sorted[sorted.length - 1]),
  };
}

export const ratio = (a, b) => (a != null && b ? round(a / b, 2) : null);

/** A plain-text table; `rows` are arrays of cells, the first row the header. */
export function formatTable(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  const line = (r) =>
    r.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join("  ");
  return [line(rows[0]), widths.map((w) => "-".repeat(w)).join("  "), ...rows.slice(1).map(line)].join("\n");
}
