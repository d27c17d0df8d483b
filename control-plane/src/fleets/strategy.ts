// A rollout's strategy (issue 33), in the Temporal options style: the public
// shape with its defaults, compiled once into batches of servers.
//   max_parallel  servers deployed at once: a number, or "n%" of the fleet
//                 (rounded up, at least 1). @default 1
//   max_failures  failed servers tolerated; one more halts the rollout. @default 0
//   pause_seconds wait between batches. @default 0
//   canary        the first batch is one server alone. @default false
//   auto_rollback on a halt, servers this rollout already switched go back to
//                 their previous release. @default true
//   drain_seconds before each server's deployment, its health path answers 503
//                 this long (a load balancer takes it out), until the deployment
//                 ends (drain.ts). 0 to 600. @default 0 (no drain)
import { z } from "zod";

export const strategySchema = z
  .strictObject({
    max_parallel: z
      .union([
        z.int().min(1).max(500),
        z.string().regex(/^([1-9][0-9]?|100)%$/, { error: "a percentage is 1% to 100%" }),
      ])
      .optional(),
    max_failures: z.int().min(0).max(500).optional(),
    pause_seconds: z.int().min(0).max(3600).optional(),
    canary: z.boolean().optional(),
    auto_rollback: z.boolean().optional(),
    drain_seconds: z.int().min(0).max(600).optional(),
  })
  .describe("how a fleet application's deploy rolls out over its servers");

export type StrategyInput = z.infer<typeof strategySchema>;

export interface Strategy {
  max_parallel: number | string;
  max_failures: number;
  pause_seconds: number;
  canary: boolean;
  auto_rollback: boolean;
  /** Absent when 0: a strategy without a drain reads as it did before there was one. */
  drain_seconds?: number;
}

/** The strategy with every default filled: the request's fields over the application's. */
export function compileStrategy(app: StrategyInput | null, req?: StrategyInput): Strategy {
  const s = { ...(app ?? {}), ...(req ?? {}) };
  return {
    max_parallel: s.max_parallel ?? 1,
    max_failures: s.max_failures ?? 0,
    pause_seconds: s.pause_seconds ?? 0,
    canary: s.canary ?? false,
    auto_rollback: s.auto_rollback ?? true,
    ...(s.drain_seconds ? { drain_seconds: s.drain_seconds } : {}),
  };
}

/** How many servers of `n` go at once. */
export function parallelOf(s: Strategy, n: number): number {
  if (typeof s.max_parallel === "number") return s.max_parallel;
  const pct = Number(s.max_parallel.slice(0, -1));
  return Math.max(1, Math.ceil((n * pct) / 100));
}

/** Positions 0..n-1 in batches: the canary alone first, then max_parallel at a time. */
export function batchesOf(s: Strategy, n: number): number[][] {
  const out: number[][] = [];
  let i = 0;
  if (s.canary && n > 0) out.push([i++]);
  const size = parallelOf(s, n);
  while (i < n) {
    const b: number[] = [];
    for (let k = 0; k < size && i < n; k++) b.push(i++);
    out.push(b);
  }
  return out;
}
