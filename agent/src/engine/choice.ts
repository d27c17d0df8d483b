// Which container engine the agent uses, decided from probes (probe.ts), and
// how that decision reads to a person: the status reported to the control
// plane (GET /api/servers `engine`), the agent's log line, and the reason a
// deployment or restart fails with when no engine works. Pure: the probes are
// passed in, so the rules are unit-tested without an engine.
import type { EngineName, EngineProbe, Probe } from "./probe.js";
import type { EngineSetting } from "./select.js";

/** What the agent reports (agent.proto EngineStatus). */
export interface EngineStatus {
  /** docker or podman; "" when auto found none working. */
  name: string;
  /** The engine's version when ok; "" otherwise. */
  version: string;
  ok: boolean;
  /** How it was chosen, or why it does not work and how to fix it (one line). */
  detail: string;
}

export interface EngineDecision {
  setting: EngineSetting;
  status: EngineStatus;
  /** The engine restart and deployments use; only set when it works. */
  working: EngineName | undefined;
  /**
   * The engine whose CLI registry login/logout run: the working one, else the
   * first CLI present (docker's login needs no daemon), else none.
   */
  cli: EngineName | undefined;
  /** Every probe made, in order (the log names each). */
  probes: EngineProbe[];
}

const ORDER: EngineName[] = ["docker", "podman"];

const FIX: Record<EngineSetting, string> = {
  auto: "install podman and runc (apt-get install podman runc) or start the docker daemon (systemctl start docker)",
  docker:
    "start the docker daemon (systemctl start docker), or set RELAYCTL_AGENT_CONTAINER_ENGINE=auto to use podman",
  podman: "install podman and runc (apt-get install podman runc)",
};

export function fixFor(setting: EngineSetting): string {
  return FIX[setting];
}

/**
 * auto: docker when its daemon answers (kept first: where both work, docker is
 * what the machine's owner runs), else podman when it answers, else none. An
 * explicit setting is probed and reported but never replaced.
 */
export async function decide(setting: EngineSetting, probe: Probe): Promise<EngineDecision> {
  const candidates = setting === "auto" ? ORDER : [setting];
  const probes: EngineProbe[] = [];
  for (const name of candidates) {
    // A probe that throws is a bug of the probe, not a working engine.
    const p = await probe(name).catch(
      (err: unknown): EngineProbe => ({ name, cli: false, ok: false, version: "", reason: String(err) }),
    );
    probes.push(p);
    if (p.ok) break;
  }
  const found = probes.find((p) => p.ok);
  const cli = found?.name ?? probes.find((p) => p.cli)?.name;
  const skipped = probes.filter((p) => !p.ok).map((p) => `${p.name} skipped (${p.reason})`);
  const status: EngineStatus = found
    ? {
        name: found.name,
        version: found.version,
        ok: true,
        detail:
          setting === "auto"
            ? ["chosen by auto", ...skipped].join("; ")
            : "set by RELAYCTL_AGENT_CONTAINER_ENGINE",
      }
    : {
        name: setting === "auto" ? "" : setting,
        version: "",
        ok: false,
        detail: `${probes.map((p) => `${p.name}: ${p.reason}`).join("; ")}. Fix: ${FIX[setting]}`,
      };
  return { setting, status, working: found?.name, cli, probes };
}

/** The reason a job that needs the engine fails with (never the engine's raw error alone). */
export function unusableReason(d: EngineDecision): string {
  const what =
    d.setting === "auto" ? "no container engine works" : `container engine ${d.setting} does not work`;
  return `${what}: ${d.status.detail}`;
}

/** The agent's log message for a decision: one line when an engine works, one per engine plus the fix when none does. */
export function logMessage(d: EngineDecision): string {
  if (d.status.ok) {
    const skipped = d.probes.filter((p) => !p.ok).map((p) => ` (${p.name} skipped: ${p.reason})`);
    return `container engine: ${d.status.name} ${d.status.version}${skipped.join("")}`;
  }
  const lines = d.probes.map((p) => `  ${p.name}: ${p.reason}`);
  const head =
    d.setting === "auto" ? "no container engine works" : `container engine ${d.setting} does not work`;
  return [
    `${head}; deployments and restarts will fail until one does`,
    ...lines,
    `  fix: ${FIX[d.setting]}`,
  ].join("\n");
}

export function sameStatus(a: EngineStatus | undefined, b: EngineStatus): boolean {
  return (
    a !== undefined && a.name === b.name && a.version === b.version && a.ok === b.ok && a.detail === b.detail
  );
}
