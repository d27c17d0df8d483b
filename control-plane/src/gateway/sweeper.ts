// Nothing stays `running` forever. The sweeper ends operations whose lease ran out
// (the agent stopped heartbeating: `failed`, "agent lost") or whose hard deadline
// passed without a report (`timeout`). Each row is claimed with a conditional
// UPDATE, so several gateway instances can sweep at once and each operation is
// finished (and announced) exactly once.
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { JobBus } from "../bus/job-bus.js";
import { type FinalStatus, finishOperation } from "../operations/store.js";

/** The agent gets this long past the deadline to report its own timeout. */
const DEADLINE_GRACE_MS = 30_000;
const BATCH = 200;

export function startSweeper(db: Knex, bus: JobBus, log: Logger, intervalMs: number): () => void {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const now = Date.now();
      await sweep(
        db,
        bus,
        log,
        "lease_expires_at",
        now,
        "failed",
        "agent lost: no heartbeat before the lease ran out",
      );
      await sweep(db, bus, log, "deadline_at", now - DEADLINE_GRACE_MS, "timeout", "hard deadline passed");
    } catch (err) {
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
  db: Knex,
  bus: JobBus,
  log: Logger,
  column: "lease_expires_at" | "deadline_at",
  before: number,
  status: FinalStatus,
  reason: string,
): Promise<void> {
  const rows = await db("operations")
    .where({ status: "running" })
    .andWhere(column, "<", before)
    .limit(BATCH)
    .select<{ id: string }[]>("id");
  for (const { id } of rows) {
    const won = await finishOperation(db, id, {
      status,
      exit_code: -1,
      stdout: "",
      stderr: reason,
      duration_ms: 0,
      error: reason,
    });
    if (!won) continue;
    log.warn({ operation_id: id, status, reason }, "operation swept");
    bus.publishDone({ operation_id: id, status });
  }
}
