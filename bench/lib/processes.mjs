// Child processes of a bench run, supervised by @relayctl/devkit (the same supervisor as the
// test harness and make dev): each writes its output to a log file in the run's temp dir, the
// bench waits for the line that says it is ready (an event, never a fixed sleep), and
// stopAll() stops them newest first, also after an error.
import { join } from "node:path";
import { ProcessGroup as Group, jsonAnswer } from "@relayctl/devkit";

export { freePort, listenPortOf, onFreePort, parseJsonLine, run } from "@relayctl/devkit";

/** Lines kept in memory per process: enough for the tail printed with an error. */
const KEEP_LINES = 200;

/** The JSON object printed on stdout that has the given field (admin commands print JSON). */
export function jsonWithField(stdout, field) {
  return jsonAnswer(stdout, "expected JSON on stdout", field);
}

/** Long-running processes of one bench run, stopped together. */
export class ProcessGroup {
  constructor(logDir) {
    this.logDir = logDir;
    this.group = new Group();
  }

  /**
   * Starts `cmd args` detached (its own process group: Ctrl-C reaches only the bench, which
   * stops everything in order, and a stop also reaches the agent's pty children).
   */
  start(name, cmd, args, { env = process.env, cwd } = {}) {
    return this.group.start({
      name,
      command: cmd,
      args,
      env,
      cwd,
      logFile: join(this.logDir, `${name}.log`),
      detached: true,
      keepLines: KEEP_LINES,
    });
  }

  /** start() with a SpawnOptions, for @relayctl/devkit's server starters (launchNats, …). */
  launch = (opts) => this.group.start({ ...opts, detached: true, keepLines: KEEP_LINES });

  /**
   * The agent before the control plane, the control plane before NATS and MariaDB. A process
   * writing a CPU profile (BENCH_CPU_PROF) gets a minute: a gateway holding 10,000 streams takes
   * longer than 5 s to close them, and a process killed leaves no profile.
   */
  stopAll(graceMs = process.env.BENCH_CPU_PROF ? 60_000 : 5000) {
    return this.group.stopAll("SIGTERM", graceMs);
  }
}
