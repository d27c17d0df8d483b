// A program under test, run as a child process (@relayctl/devkit's supervisor): every output
// line kept in memory and in a log file, waits on log lines and on exit, and kills that also
// reach its descendants. Each one is stopped by the test file's cleanupAll.
import { ManagedProcess as Supervised, type SpawnOptions as SupervisedOptions } from "@relayctl/devkit";
import { onCleanup } from "./cleanup";

export type { ExitInfo, LogLine } from "@relayctl/devkit";

export interface SpawnOptions extends SupervisedOptions {
  logFile: string;
}

export class ManagedProcess extends Supervised {
  override readonly logFile: string;

  constructor(opts: SpawnOptions) {
    super(opts);
    this.logFile = opts.logFile;
    onCleanup(async () => {
      await this.stop("SIGKILL");
    });
  }
}

/** process.env without RELAYCTL_* (the tests set exactly what they mean) plus extra. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("RELAYCTL_")) env[k] = v;
  return { ...env, ...extra };
}
