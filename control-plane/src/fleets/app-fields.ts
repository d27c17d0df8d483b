// An application's fleet fields (issue 33) as the applications store reads and
// writes them: `placement` (placement.ts) and `rollout_strategy` (strategy.ts),
// both JSON columns, both null for an application on its server_id alone.
import type { Knex } from "knex";
import { type Placement, placementOf, resolvePlacement } from "./placement.js";
import type { StrategyInput } from "./strategy.js";

export interface FleetInput {
  placement?: Placement;
  rollout_strategy?: StrategyInput | null;
}

export interface FleetColumns {
  placement?: string | null;
  rollout_strategy?: string | null;
}

/** The columns a change sets; a list naming an unknown server is a 422 now, not at the deploy. */
export async function fleetColumns(db: Knex, tenantId: string, input: FleetInput): Promise<FleetColumns> {
  const out: FleetColumns = {};
  if (input.placement !== undefined) {
    if (input.placement && "servers" in input.placement)
      await resolvePlacement(db, tenantId, input.placement);
    out.placement = input.placement === null ? null : JSON.stringify(input.placement);
  }
  if (input.rollout_strategy !== undefined)
    out.rollout_strategy = input.rollout_strategy === null ? null : JSON.stringify(input.rollout_strategy);
  return out;
}

export function presentFleet(row: FleetColumns) {
  return {
    placement: placementOf(row.placement),
    rollout_strategy: row.rollout_strategy ? (JSON.parse(row.rollout_strategy) as StrategyInput) : null,
  };
}
