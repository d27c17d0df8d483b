// What the api tells the gateway with a job, beside the job's bytes (a NATS
// header, never on the agent's stream): the tenant's audit chain head as the
// api's start left it, and the operation row's facts its completion event
// needs. With them the gateway commits the completion in one round trip on a
// guessed head (audit/group-commit.ts) instead of locking and reading first.
// Nothing here is trusted: a stale head or wrong facts stop that commit before
// anything of it lands, and the completion goes the locking way. A caller may
// also ask for a settlement (an external-deploy sync's entries): stored with the
// completion, or, when the gateway cannot, by the caller itself.
import { type MsgHdrs, headers as natsHeaders } from "nats";

export interface JobHint {
  /**
   * The chain head's seq and hash after the operation's start committed; seq 0 (no head) when the
   * job carries its start for the gateway to commit (bus/job-start.ts), which leaves its own head.
   */
  seq: number;
  head: string | null;
  operationType: string;
  startedAt: number;
  runId: string | null;
  /**
   * What the caller asks the completion to store with the final state, in the same
   * commit (OperationService.onSettle, by operation type; read there, not here).
   */
  settle?: unknown;
}

const HEADER = "Rc-Job-Hint";

/** `headers` (made when absent) with the hint set; unchanged without a hint. */
export function withHint(headers: MsgHdrs | undefined, hint: JobHint | undefined): MsgHdrs | undefined {
  if (!hint) return headers;
  const h = headers ?? natsHeaders();
  h.set(HEADER, JSON.stringify(hint));
  return h;
}

/** The hint a job message carries, or undefined (none, or not one of ours). */
export function hintOf(headers: MsgHdrs | undefined): JobHint | undefined {
  const raw = headers?.get(HEADER);
  if (!raw) return undefined;
  try {
    const h = JSON.parse(raw) as Partial<JobHint>;
    const ok =
      Number.isSafeInteger(h.seq) &&
      (h.head === null || typeof h.head === "string") &&
      typeof h.operationType === "string" &&
      Number.isSafeInteger(h.startedAt) &&
      (h.runId === null || typeof h.runId === "string");
    return ok ? (h as JobHint) : undefined;
  } catch {
    return undefined;
  }
}
