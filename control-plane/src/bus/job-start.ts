// An operation's start, sent with its job for the gateway to commit (a NATS
// header of the job on subjects.jobStart, never on the agent's stream): the
// operation's row and its audit event, as the api built them. The gateway
// commits them, as the api would have, before the job goes on the stream, so
// the tenant's chain has one writer per exec (the gateway's starts and
// completions share its batches and its guessed head) instead of two that make
// each other's guesses stale (bench/README.md, exec-throughput). Nothing runs
// before its start is committed, whoever commits it: a gateway that cannot puts
// nothing on the stream and refuses, and the api then commits the same row itself.
import { type MsgHdrs, headers as natsHeaders } from "nats";
import type { AuditEventInput } from "../audit/audit-log.js";
import type { CountWithStart } from "../auth/deferred-count.js";

/** An operation's row (operations/store.ts, OPERATION_COLUMNS) and its start event. */
export interface JobStart {
  row: {
    id: string;
    tenant_id: string;
    server_id: string;
    operation_type: string;
    status: "running";
    delivery: "pending";
    key_id: string | null;
    run_id: string | null;
    lease_expires_at: number | null;
    deadline_at: number;
    pre_boot_id: string | null;
    started_at: number;
  };
  event: AuditEventInput;
  /** The request's count, committed with the start and guarded (auth/deferred-count.ts). */
  count?: CountWithStart;
}

const HEADER = "Rc-Job-Start";
/**
 * A start that carries its request's count goes under a header of its own: a gateway that
 * does not know counts finds no start it can read, refuses the job, and the api commits the
 * start with its count itself (a rolling upgrade loses no count; it only takes the slower way).
 */
const COUNTED_HEADER = "Rc-Job-Start-Counted";

/** `headers` (made when absent) with the start set. Non-ASCII is escaped: a header is a line of text. */
export function withStart(headers: MsgHdrs | undefined, start: JobStart): MsgHdrs {
  const h = headers ?? natsHeaders();
  h.set(
    start.count ? COUNTED_HEADER : HEADER,
    JSON.stringify(start).replace(
      /[\u007f-\uffff]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
    ),
  );
  return h;
}

const str = (v: unknown): v is string => typeof v === "string";
const strOrNull = (v: unknown) => v === null || str(v);
const int = (v: unknown): v is number => Number.isSafeInteger(v);

/**
 * The start a job message carries for the server `serverId` and the job
 * `operationId`, or undefined: none, not one of ours, or one that does not
 * describe that job on that server (then nothing is committed, and nothing runs).
 */
export function startOf(
  headers: MsgHdrs | undefined,
  serverId: string,
  operationId: string,
): JobStart | undefined {
  const counted = headers?.get(COUNTED_HEADER);
  const raw = counted || headers?.get(HEADER);
  if (!raw) return undefined;
  let s: Partial<JobStart>;
  try {
    s = JSON.parse(raw) as Partial<JobStart>;
  } catch {
    return undefined;
  }
  const r = s.row;
  const e = s.event;
  if (!r || !e || typeof e.payload !== "object" || e.payload === null || Array.isArray(e.payload))
    return undefined;
  const rowOk =
    r.id === operationId &&
    r.server_id === serverId &&
    str(r.tenant_id) &&
    str(r.operation_type) &&
    r.status === "running" &&
    r.delivery === "pending" &&
    strOrNull(r.key_id) &&
    strOrNull(r.run_id) &&
    (r.lease_expires_at === null || int(r.lease_expires_at)) &&
    int(r.deadline_at) &&
    r.pre_boot_id === null &&
    int(r.started_at);
  const eventOk =
    e.tenantId === r.tenant_id &&
    e.eventType === `operation.${r.operation_type}` &&
    e.operationId === r.id &&
    e.serverId === r.server_id &&
    e.keyId === r.key_id &&
    e.runId === r.run_id &&
    (e.payload as Record<string, unknown>).operation_id === r.id;
  const c = s.count;
  // A count under the counted header only, and the counted header only with a count.
  const countOk =
    (c === undefined && !counted) ||
    (c !== null &&
      typeof c === "object" &&
      !!counted &&
      c.key_id === r.key_id &&
      int(c.window_seconds) &&
      int(c.window_start) &&
      str(c.digest));
  return rowOk && eventOk && countOk ? (s as JobStart) : undefined;
}
