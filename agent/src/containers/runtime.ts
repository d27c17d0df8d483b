// A deployed container's run-time facts from `<engine> container inspect`: the
// state word, its last exit, the engine's restart count and the application it
// belongs to (label relayctl.application). Docker and podman print these in the
// same places; a time the engine never set is "0001-01-01T00:00:00Z" (read as 0).
import { APPLICATION_LABEL, SERVER_LABEL } from "../deploy/naming.js";

export interface ContainerRuntime {
  /** Without docker's leading "/". */
  name: string;
  applicationId: string;
  /** running, restarting, exited, created, stopping, dead... */
  status: string;
  exitCode: number;
  restartCount: number;
  /** Unix epoch ms; 0 when unset. */
  createdAt: number;
  startedAt: number;
  finishedAt: number;
  restartPolicy: string;
  /** Its `relayctl.server` label: the server whose agent deployed it; "" for containers from before it. */
  serverId: string;
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => (v !== null && typeof v === "object" ? (v as Json) : {});

/** An engine time as epoch ms; 0 for the zero time, junk or absence. */
export function engineTime(v: unknown): number {
  if (typeof v !== "string") return 0;
  const ms = Date.parse(v);
  return Number.isFinite(ms) && ms > 0 ? ms : 0;
}

/** The labelled containers of an inspect answer (others and junk are skipped). */
export function parseRuntime(stdout: string): ContainerRuntime[] {
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch {
    return [];
  }
  return (Array.isArray(doc) ? doc : []).flatMap((item) => {
    const c = obj(item);
    const labels = obj(obj(c.Config).Labels);
    const applicationId = labels[APPLICATION_LABEL];
    if (typeof c.Name !== "string" || typeof applicationId !== "string") return [];
    const state = obj(c.State);
    return [
      {
        name: c.Name.replace(/^\//, ""),
        applicationId,
        status: typeof state.Status === "string" ? state.Status : "unknown",
        exitCode: Number(state.ExitCode ?? 0) || 0,
        restartCount: Number(c.RestartCount ?? 0) || 0,
        createdAt: engineTime(c.Created),
        startedAt: engineTime(state.StartedAt),
        finishedAt: engineTime(state.FinishedAt),
        restartPolicy: String(obj(obj(c.HostConfig).RestartPolicy).Name ?? ""),
        serverId: String(labels[SERVER_LABEL] ?? ""),
      },
    ];
  });
}

/**
 * The container that stands for its application: a running one first (during a
 * deploy the new one runs beside the old), then the newest.
 */
export function liveContainers(all: ContainerRuntime[]): Map<string, ContainerRuntime> {
  const out = new Map<string, ContainerRuntime>();
  for (const c of all) {
    const best = out.get(c.applicationId);
    const rank = (x: ContainerRuntime) => [x.status === "running" ? 1 : 0, x.createdAt] as const;
    if (!best) out.set(c.applicationId, c);
    else {
      const [ra, ca] = rank(c);
      const [rb, cb] = rank(best);
      if (ra > rb || (ra === rb && ca > cb)) out.set(c.applicationId, c);
    }
  }
  return out;
}
