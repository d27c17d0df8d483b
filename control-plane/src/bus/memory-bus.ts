// In-process JobBus for `make dev` (api and gateway in one process, no NATS).
// Same semantics as nats-bus.ts: no handler = not connected, newest handler wins.
// Messages go through the same codec as on NATS, so what a handler receives is
// exactly what it would get from the wire (and never shares memory with the caller).
import { EventEmitter } from "node:events";
import { codec } from "./codec.js";
import type {
  DispatchOutcome,
  DoneWaiter,
  Job,
  JobBus,
  JobHandler,
  LogsOutput,
  OperationDone,
  Unsubscribe,
} from "./job-bus.js";
import type { JobHint } from "./job-hint.js";

export class MemoryBus implements JobBus {
  private readonly handlers = new Map<string, JobHandler>();
  private readonly events = new EventEmitter().setMaxListeners(0);

  async dispatch(serverId: string, job: Job, hint?: JobHint): Promise<DispatchOutcome> {
    const handler = this.handlers.get(serverId);
    if (!handler) return "not_connected";
    // Like a gateway behind NATS: a handler that fails has not put the job on a stream.
    const onStream = await handler(codec.job.decode(codec.job.encode(job)), hint).catch(() => false);
    return onStream ? "on_stream" : "not_connected";
  }

  /** In-process: always there. */
  async ping(_timeoutMs: number): Promise<void> {}

  /** One handler per server in process: its answer is every answer. */
  dispatchToAll(serverId: string, job: Job, hint?: JobHint): Promise<DispatchOutcome> {
    return this.dispatch(serverId, job, hint);
  }

  /** As on NATS: only a refusal is answered, after the handler said so. */
  send(serverId: string, job: Job, hint?: JobHint): void {
    void this.dispatch(serverId, job, hint).then((outcome) => {
      if (outcome === "not_connected") this.events.emit(`refused:${job.operationId}`);
    });
  }

  async awaitDone(operationId: string): Promise<DoneWaiter> {
    let listener: (bytes: Uint8Array) => void = () => {};
    let onRefused: () => void = () => {};
    const done = new Promise<OperationDone>((resolve) => {
      listener = (bytes) => resolve(codec.done.decode(bytes));
      this.events.once(`done:${operationId}`, listener);
    });
    const refused = new Promise<void>((resolve) => {
      onRefused = resolve;
      this.events.once(`refused:${operationId}`, onRefused);
    });
    const cancel = () => {
      this.events.off(`done:${operationId}`, listener);
      this.events.off(`refused:${operationId}`, onRefused);
    };
    return { done, refused, cancel };
  }

  serveServer(serverId: string, handler: JobHandler): () => void {
    this.handlers.set(serverId, handler);
    return () => {
      if (this.handlers.get(serverId) === handler) this.handlers.delete(serverId);
    };
  }

  async connectedServers(serverIds: string[]): Promise<Set<string>> {
    return new Set(serverIds.filter((id) => this.handlers.has(id)));
  }

  publishDone(event: OperationDone): void {
    this.events.emit(`done:${event.operationId}`, codec.done.encode(event));
  }

  publishTakeover(serverId: string, connectionId: string): void {
    this.events.emit(`takeover:${serverId}`, connectionId);
  }

  onTakeover(serverId: string, handler: (connectionId: string) => void): () => void {
    this.events.on(`takeover:${serverId}`, handler);
    return () => this.events.off(`takeover:${serverId}`, handler);
  }

  publishLive(output: LogsOutput): void {
    this.events.emit(`live:${output.operationId}`, codec.live.encode(output));
  }

  async subscribeLive(operationId: string, handler: (o: LogsOutput) => void): Promise<Unsubscribe> {
    const listener = (bytes: Uint8Array) => handler(codec.live.decode(bytes));
    this.events.on(`live:${operationId}`, listener);
    return () => this.events.off(`live:${operationId}`, listener);
  }

  publishProgress(operationId: string): void {
    this.events.emit(`progress:${operationId}`);
  }

  async subscribeProgress(
    operationId: string,
    handler: (what: "progress" | "done") => void,
  ): Promise<Unsubscribe> {
    const onProgress = () => handler("progress");
    const onDone = () => handler("done");
    this.events.on(`progress:${operationId}`, onProgress);
    this.events.on(`done:${operationId}`, onDone);
    return () => {
      this.events.off(`progress:${operationId}`, onProgress);
      this.events.off(`done:${operationId}`, onDone);
    };
  }

  cancelJob(serverId: string, operationId: string): void {
    this.events.emit(`cancel:${serverId}`, codec.cancel.encode(operationId));
  }

  onCancel(serverId: string, handler: (operationId: string) => void): Unsubscribe {
    const listener = (bytes: Uint8Array) => handler(codec.cancel.decode(bytes));
    this.events.on(`cancel:${serverId}`, listener);
    return () => this.events.off(`cancel:${serverId}`, listener);
  }

  async close(): Promise<void> {
    this.handlers.clear();
  }
}
