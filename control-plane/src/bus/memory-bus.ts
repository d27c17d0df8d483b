// In-process JobBus for `make dev` (api and gateway in one process, no NATS).
// Same semantics as nats-bus.ts: no handler = not connected, newest handler wins.
import { EventEmitter } from "node:events";
import type { DispatchOutcome, DoneEvent, DoneWaiter, JobBus, JobEnvelope, JobHandler } from "./job-bus.js";

export class MemoryBus implements JobBus {
  private readonly handlers = new Map<string, JobHandler>();
  private readonly events = new EventEmitter().setMaxListeners(0);

  async dispatch(serverId: string, job: JobEnvelope): Promise<DispatchOutcome> {
    const handler = this.handlers.get(serverId);
    if (!handler) return "not_connected";
    return (await handler(structuredClone(job))) ? "acked" : "not_connected";
  }

  async awaitDone(operationId: string): Promise<DoneWaiter> {
    let listener: (e: DoneEvent) => void = () => {};
    const done = new Promise<DoneEvent>((resolve) => {
      listener = resolve;
      this.events.once(`done:${operationId}`, listener);
    });
    return { done, cancel: () => this.events.off(`done:${operationId}`, listener) };
  }

  serveServer(serverId: string, handler: JobHandler): () => void {
    this.handlers.set(serverId, handler);
    return () => {
      if (this.handlers.get(serverId) === handler) this.handlers.delete(serverId);
    };
  }

  publishDone(event: DoneEvent): void {
    this.events.emit(`done:${event.operation_id}`, event);
  }

  publishTakeover(serverId: string, connectionId: string): void {
    this.events.emit(`takeover:${serverId}`, connectionId);
  }

  onTakeover(serverId: string, handler: (connectionId: string) => void): () => void {
    this.events.on(`takeover:${serverId}`, handler);
    return () => this.events.off(`takeover:${serverId}`, handler);
  }

  async close(): Promise<void> {
    this.handlers.clear();
  }
}
