// The runner port: what the job layer asks of whatever executes a command. The
// only adapter today is pty-runner.ts (node-pty); a test or another platform can
// supply its own without touching jobs/.

export interface RunRequest {
  /** Shell command line, run by the agent's shell. */
  command: string;
  /** Absolute directory to run in; empty means the agent user's home directory. */
  workingDirectory: string;
  /** Added on top of the agent's own environment. */
  env: Record<string, string>;
  /** Hard deadline in seconds; 0 means none. Past it the whole process tree is killed. */
  deadlineSeconds: number;
  /**
   * Values removed from stdout and stderr, in every form scrubber.ts knows, before
   * the outcome is returned; values under 4 characters are left alone. A job kind
   * that hands the command other secrets (a registry password) passes them here,
   * with the env values it wants scrubbed too.
   * @default the values of `env`
   */
  secrets?: string[];
  /**
   * Called with the output as it comes, scrubbed like the outcome's (and, like it,
   * only up to the output cap), for a caller that follows it live.
   */
  onOutput?: (stream: "stdout" | "stderr", text: string) => void;
}

export type RunStatus = "completed" | "failed" | "timeout";

export interface RunOutcome {
  /** completed: it ran and exited (whatever the code); failed: it could not run; timeout: killed at the deadline. */
  status: RunStatus;
  /** Exit code; 128+n when ended by signal n; -1 when it never ran. */
  exitCode: number;
  stdout: string;
  stderr: string;
  durationMs: number;
  /** Human reason for failed and timeout. */
  error?: string;
}

export interface CommandRunner {
  run(request: RunRequest): Promise<RunOutcome>;
  /** Releases what the runner holds between runs (temp files); runs in flight are not stopped. */
  close(): Promise<void>;
}
