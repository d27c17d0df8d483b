// Request ids: the id of the API request (Fastify's, or a sane X-Request-Id the
// caller sent) follows the work it started, so every log line of that work can
// name it: through async calls here (AsyncLocalStorage, read by the logger's
// mixin), in the Job over NATS, and to the agent.
import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";

const current = new AsyncLocalStorage<string>();

/** Printable, short, no spaces or quotes: safe in a log line and a header. */
const SANE = /^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,127}$/;

/** The caller's X-Request-Id when it is sane, else a new UUID. */
export function requestIdFrom(header: string | string[] | undefined): string {
  return typeof header === "string" && SANE.test(header) ? header : randomUUID();
}

/** Runs fn with `id` as the current request id (fn alone when there is none). */
export function withRequestId<T>(id: string | undefined, fn: () => T): T {
  return id ? current.run(id, fn) : fn();
}

export function currentRequestId(): string | undefined {
  return current.getStore();
}

/** A logger bound to a request already names it: the mixin must not add it twice. */
export const BOUND_REQUEST_ID = Symbol("relayctl.boundRequestId");

/** pino mixin: `req_id` on every line logged inside a request's work. */
export function requestIdMixin(_obj: object, _level: number, logger: object): Record<string, string> {
  const id = (logger as { [BOUND_REQUEST_ID]?: boolean })[BOUND_REQUEST_ID] ? undefined : current.getStore();
  return id ? { req_id: id } : {};
}
