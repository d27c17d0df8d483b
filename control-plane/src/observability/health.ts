// Liveness and readiness over HTTP, on both roles. /healthz answers while the
// process serves requests at all; /readyz asks the database and the job bus for
// a round trip each (in parallel, each within READY_TIMEOUT_MS) and answers 503
// naming what did not answer, so a load balancer stops sending work to a
// process that could only answer 503 itself.
import type { Knex } from "knex";
import { z } from "zod";
import type { JobBus } from "../bus/job-bus.js";
import { RcError } from "../errors.js";
import { type RouteSpec, route } from "../http/route.js";

const READY_TIMEOUT_MS = 2000;

export interface HealthOptions {
  db: Knex;
  bus: JobBus;
  /** How /readyz names the bus: "nats", or "job bus" for the in-process one. */
  busName: string;
}

const healthy = z.object({ status: z.literal("ok") });
const ready = z.object({
  status: z.literal("ok"),
  checks: z.object({ database: z.literal("ok"), bus: z.literal("ok") }),
});
const detail = z.object({ detail: z.string() });

function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

async function answers(check: () => Promise<unknown>): Promise<boolean> {
  try {
    await within(check(), READY_TIMEOUT_MS);
    return true;
  } catch {
    return false;
  }
}

const access = { public: "a probe's: it says only whether the process and its dependencies answer" };

export function healthRoutes(opts: HealthOptions): RouteSpec[] {
  return [
    route({
      method: "GET",
      url: "/healthz",
      access,
      tag: "observability",
      summary: "Alive",
      responses: { 200: healthy },
      handler: async () => ({ status: "ok" as const }),
    }),
    route({
      method: "GET",
      url: "/readyz",
      access,
      tag: "observability",
      summary: "Ready: the database and the job bus answer",
      responses: { 200: ready, 503: detail },
      handler: async () => {
        const [database, bus] = await Promise.all([
          answers(() => opts.db.raw("select 1")),
          answers(() => opts.bus.ping(READY_TIMEOUT_MS)),
        ]);
        const down = [database ? "" : "database", bus ? "" : opts.busName].filter(Boolean);
        if (down.length > 0)
          throw new RcError("RC_ERR_NOT_READY", `not ready: ${down.join(" and ")} unreachable`);
        return { status: "ok" as const, checks: { database: "ok" as const, bus: "ok" as const } };
      },
    }),
  ];
}
