import test from "ava";
import type { SyncResult } from "./client.js";
import { type RunOutcome, TABLE_HEADER, failureOf, formatTable, outputsOf, reportRows } from "./report.js";

const result = (name: string, status: SyncResult["status"], reason?: string): SyncResult => ({
  application_id: `id-${name}`,
  container_name: name,
  status,
  signature_hash: `sha256:${"ab".repeat(32)}`,
  synced_fqdns: [`${name}.example.com`],
  ...(reason ? { reason } : {}),
});

const outcome = (results: SyncResult[], force = false): RunOutcome => ({
  sessionId: "s-1",
  sync: { session_id: "s-1", results, errors: [{ container_name: "api", reason: "agent not connected" }] },
  unmatched: ["worker"],
  force,
});

test("report - one row per result, error and unmatched service", (t) => {
  const rows = reportRows(outcome([result("web", "synced"), result("shop", "conflict", "synced 3 s ago")]));
  t.deepEqual(
    rows.map((r) => [r[0], r[1]]),
    [
      ["web", "synced"],
      ["shop", "conflict"],
      ["api", "error"],
      ["worker", "unmatched"],
    ],
  );
  t.is(rows[0][3], "sha256:abababababab");
  const table = formatTable(TABLE_HEADER, rows).split("\n");
  t.is(table.length, 6);
  t.is(table[0].indexOf("status"), table[2].indexOf("synced"), "columns line up");
});

test("report - outputs count statuses and carry the JSON", (t) => {
  const o = outcome([result("web", "synced"), result("a", "noop"), result("b", "drift_recovered")]);
  const out = outputsOf(o);
  t.is(out.synced, "1");
  t.is(out.noop, "1");
  t.is(out.drift_recovered, "1");
  t.is(out.conflicts, "0");
  t.is(JSON.parse(out.results).length, 3);
  t.deepEqual(JSON.parse(out.unmatched), ["worker"]);
});

test("report - conflicts fail the step unless force; errors always do", (t) => {
  const conflicted = {
    ...outcome([result("shop", "conflict", "r")]),
    sync: { session_id: "s", results: [result("shop", "conflict", "r")], errors: [] },
  };
  t.regex(failureOf(conflicted) ?? "", /1 conflict\(s\) \(shop\)/);
  t.is(failureOf({ ...conflicted, force: true }), undefined);
  t.regex(failureOf(outcome([result("web", "synced")])) ?? "", /api: agent not connected/);
  t.is(
    failureOf({ ...outcome([]), sync: { session_id: "s", results: [result("w", "noop")], errors: [] } }),
    undefined,
  );
});
