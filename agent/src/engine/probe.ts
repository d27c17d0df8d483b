// Asks one container engine whether it answers: `<engine> info` with a short
// deadline. A docker CLI without a daemon (or a podman without its runtime's
// storage) is on PATH but cannot build or run anything; only an engine whose
// `info` exits 0 is worth choosing. The CLI being present is kept apart,
// because registry login/logout need only the CLI (docker logs in without a
// daemon) while restart and deployments need the engine itself.
import { onPath } from "./select.js";
import { runCli } from "./cli-process.js";

export type EngineName = "docker" | "podman";

/** What one `info` call found. */
export interface EngineProbe {
  name: EngineName;
  /** The CLI is on the agent's PATH. */
  cli: boolean;
  /** `info` exited 0 within the deadline. */
  ok: boolean;
  /** The engine's (server's) version when ok; "" otherwise. */
  version: string;
  /** Why it is not ok (one line); "" when ok. */
  reason: string;
}

/** `info` answers from the engine itself: the server's version, not the CLI's. */
const VERSION_FORMAT: Record<EngineName, string> = {
  docker: "{{.ServerVersion}}",
  podman: "{{.Version.Version}}",
};

/**
 * A daemon that is up answers `info` in ~0.1 s (docker) to ~1.3 s (podman,
 * measured here); one that hangs (a stuck socket) must not hold a deployment
 * for long. But podman's `info` waits for its storage lock, which a build
 * holds: with test files building at once on 2 loaded cores it took more than
 * 10 s here, and a busy engine is not a missing one. @default 30
 */
export const PROBE_DEADLINE_SECONDS = 30;

export type Probe = (name: EngineName) => Promise<EngineProbe>;

export async function probeEngine(
  name: EngineName,
  deadlineSeconds = PROBE_DEADLINE_SECONDS,
): Promise<EngineProbe> {
  if (!onPath(name)) return { name, cli: false, ok: false, version: "", reason: `no ${name} on PATH` };
  const o = await runCli({ binary: name, args: ["info", "--format", VERSION_FORMAT[name]], deadlineSeconds });
  if (o.status === "completed" && o.exitCode === 0) {
    const version = o.stdout.trim().split("\n")[0]?.trim().slice(0, 64) ?? "";
    return { name, cli: true, ok: true, version, reason: "" };
  }
  return {
    name,
    cli: true,
    ok: false,
    version: "",
    reason: `\`${name} info\` ${failure(o, deadlineSeconds)}`,
  };
}

function failure(o: Awaited<ReturnType<typeof runCli>>, deadlineSeconds: number): string {
  if (o.status === "timeout") return `gave no answer within ${deadlineSeconds} s`;
  if (o.status === "failed") return `could not run: ${o.error ?? "unknown error"}`;
  // The last line is where both CLIs put the error (docker prints client info first).
  const last = o.stderr
    .trim()
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .at(-1);
  return `exited with code ${o.exitCode}${last ? `: ${last.slice(0, 300)}` : ""}`;
}
