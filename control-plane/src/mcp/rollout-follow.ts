// Following a fleet application's rollout for deploy_application and
// rollback_application (docs/fleets.md): a person's token reads the rollout
// (GET /api/applications/{id}/rollouts/{rollout_id}) until it ends, and each
// server's state change becomes an MCP progress notification (`step`: the
// server's name, `status`: its state); the call answers with the rollout and its
// servers. An automation key, which cannot read the dashboard API, follows the
// rollout's operation instead (deploy-follow.ts), whose result lists every server.
import { setTimeout as sleep } from "node:timers/promises";
import type { ApiCaller } from "./api-client.js";
import type { StepProgress } from "./deploy-follow.js";

const POLL_MS = 1000;

interface RolloutView {
  status: string;
  servers: { server_name: string; state: string; failed_step: string | null; detail: string | null }[];
}

export async function followRollout(
  api: ApiCaller,
  applicationId: string,
  rolloutId: string,
  report: (p: StepProgress) => Promise<void>,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  const said = new Map<string, string>();
  const path = `/api/applications/${encodeURIComponent(applicationId)}/rollouts/${encodeURIComponent(rolloutId)}`;
  for (;;) {
    const r = (await api.json("GET", path)) as unknown as RolloutView & Record<string, unknown>;
    for (const s of r.servers) {
      if (said.get(s.server_name) === s.state) continue;
      said.set(s.server_name, s.state);
      const why = s.failed_step ? `failed at ${s.failed_step}: ${s.detail ?? ""}` : undefined;
      await report({ step: s.server_name, status: s.state, ...(why ? { log: why } : {}) });
    }
    if (r.status !== "running") return r;
    await sleep(POLL_MS, undefined, { signal });
  }
}
