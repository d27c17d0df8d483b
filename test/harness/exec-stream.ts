// A steady stream of POST /exec calls from several clients, each its own key and api
// process, every call recorded (when it was sent and answered, the status, the operation
// id, the token its command carries), so a test can account for every one afterwards.
// Each client sends one call at a time, paced to `perSecond` (pacing sets the load, it
// waits for nothing); a call the network fails is recorded with status 0.
import { type ApiTarget, api } from "./http";
import { pollUntil } from "./wait";

export interface ExecCall {
  client: number;
  /** Unique per call: the command writes it to the server's marker file and prints it. */
  token: string;
  serverIndex: number;
  sentAt: number;
  answeredAt: number;
  /** HTTP status, or 0 when the call got no answer. */
  status: number;
  operationId?: string;
  /** The operation's status in the answer (200: its final status; 202: running). */
  operationStatus?: string;
  stdout?: string;
  detail?: string;
}

export interface ExecStreamOptions {
  /** One per client: an api process's URL and the client's own key. */
  clients: ApiTarget[];
  serverIds: string[];
  perSecond: number;
  /** The command of a call; it must write `token` once where the test can count it. */
  command: (token: string, serverIndex: number, n: number) => string;
  timeoutSeconds: number;
}

export interface ExecStream {
  readonly calls: ExecCall[];
  /** Resolves once `n` more calls matching `filter` were answered after this call. */
  answered(n: number, timeoutMs: number, filter?: (c: ExecCall) => boolean): Promise<void>;
  /** Stops sending and resolves when every call in flight has its answer. */
  stop(): Promise<void>;
}

export function startExecStream(opts: ExecStreamOptions): ExecStream {
  const calls: ExecCall[] = [];
  const stopped = new AbortController();
  const client = async (index: number, target: ApiTarget) => {
    for (let n = 0; !stopped.signal.aborted; n++) {
      const serverIndex = Math.floor(Math.random() * opts.serverIds.length);
      const token = `c${index}n${n}x${Math.random().toString(36).slice(2, 8)}`;
      const sentAt = Date.now();
      const call: ExecCall = { client: index, token, serverIndex, sentAt, answeredAt: 0, status: 0 };
      try {
        const body = {
          server_id: opts.serverIds[serverIndex]!,
          command: opts.command(token, serverIndex, n),
          timeout_seconds: opts.timeoutSeconds,
        };
        // Well past timeout_seconds: an answer later than this is a hang, recorded as status 0.
        const res = await api(target, "/exec", { body, timeoutMs: opts.timeoutSeconds * 1000 + 20_000 });
        call.status = res.status;
        if (typeof res.json.operation_id === "string") call.operationId = res.json.operation_id;
        if (typeof res.json.status === "string") call.operationStatus = res.json.status;
        if (typeof res.json.stdout === "string") call.stdout = res.json.stdout;
        if (typeof res.json.detail === "string") call.detail = res.json.detail;
      } catch (err) {
        call.detail = (err as Error).message;
      }
      call.answeredAt = Date.now();
      calls.push(call);
      await pace(sentAt + 1000 / opts.perSecond - Date.now(), stopped.signal);
    }
  };
  const running = opts.clients.map((target, i) => client(i, target));
  return {
    calls,
    answered: async (n, timeoutMs, filter = () => true) => {
      const from = calls.length;
      await pollUntil(async () => calls.slice(from).filter(filter).length >= n || undefined, {
        what: `${n} more exec calls answered`,
        timeoutMs,
        intervalMs: 50,
      });
    },
    stop: async () => {
      stopped.abort();
      await Promise.all(running);
    },
  };
}

function pace(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}
