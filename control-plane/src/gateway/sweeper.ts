// Nothing stays `running` forever. The sweeper ends operations whose lease ran out
// (the agent stopped heartbeating: `failed`, "agent lost") or whose hard deadline
// passed without a report (`timeout`; a reboot, which has no lease, right at its
// deadline: the agent cannot time a reboot itself). Each row is claimed with a conditional
// UPDATE, so several gateway instances can sweep at once and each operation is
// finished (and announced) exactly once.
import type { Logger } from "pino";
import type { OperationService } from "../operations/service.js";
import type { FinalStatus } from "../operations/store.js";
import { UNTIMED_TYPES } from "../operations/types.js";

/** The agent gets this long past the deadline to report its own timeout. */
const DEADLINE_GRACE_MS = 30_000;
/** Operations the agent does not time itself (no lease either): ended right at the deadline. */
const NO_AGENT_DEADLINE = UNTIMED_TYPES;
const BATCH = 200;

export function startSweeper(
  ops: OperationService,
  log: Logger,
  intervalMs: number,
  /**
   * Leases are not swept until this long after start, nor this long after a sweep
   * failed (the database was unreachable): agents could not heartbeat meanwhile (no
   * gateway up, or none able to store anything), and they renew their operations'
   * leases, and re-send the results they hold, once they are back on a stream.
   * Sweeping at once would fail those operations spuriously.
   */
  leaseMs = 0,
): () => void {
  // When leases may be swept again: leaseMs after start, then after each failed sweep.
  let quietUntil = Date.now() + leaseMs;
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const now = Date.now();
      if (now >= quietUntil)
        await sweep(
          ops,
          log,
          "lease_expires_at",
          now,
          "failed",
          "agent lost: no heartbeat before the lease ran out",
        );
      await sweep(ops, log, "deadline_at", now - DEADLINE_GRACE_MS, "timeout", "hard deadline passed", {
        exceptTypes: NO_AGENT_DEADLINE,
      });
      await sweep(ops, log, "deadline_at", now, "timeout", "not back (no new boot id) by the deadline", {
        onlyTypes: NO_AGENT_DEADLINE,
      });
    } catch (err) {
      // Seen in test/chaos.test.ts: right after MariaDB came back from a restart longer
      // than a lease, the sweeper failed as "agent lost" commands whose agents had run
      // them and were reconnecting to report the results.
      quietUntil = Date.now() + leaseMs;
      log.warn({ err }, "sweep failed; will retry");
    } finally {
      running = false;
    }
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

async function sweep(
  ops: OperationService,
  log: Logger,
  column: "lease_expires_at" | "deadline_at",
  before: number,
  status: FinalStatus,
  reason: string,
  types: { onlyTypes?: string[]; exceptTypes?: string[] } = {},
): Promise<void> {
  const query = ops.db("operations").where({ status: "running" }).andWhere(column, "<", before);
  if (types.onlyTypes) query.whereIn("operation_type", types.onlyTypes);
  if (types.exceptTypes) query.whereNotIn("operation_type", types.exceptTypes);
  const rows = await query.limit(BATCH).select<{ id: string }[]>("id");
  for (const { id } of rows) {
    // The service's conditional UPDATE is the claim: of several sweeping
    // gateways exactly one finishes (and announces) each operation.
    if (await ops.fail(id, status, reason)) log.warn({ operation_id: id, status, reason }, "operation swept");
  }
}
