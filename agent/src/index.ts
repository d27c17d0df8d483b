// Public entry of the agent package: what tests and other packages may use.
export { AgentConnection, type AgentConnectionOptions } from "./connection/agent-connection.js";
export { Backoff } from "./connection/backoff.js";
export { type AgentConfig, ConfigError, loadConfig } from "./config.js";
export { type AgentFile, readAgentFile, writeAgentFile } from "./enrollment/agent-file.js";
export { EnrollError, enroll } from "./enrollment/enroll.js";
export { Dispatcher, type DispatcherOptions } from "./jobs/dispatcher.js";
export { runExecJob } from "./jobs/exec.js";
export { Journal } from "./jobs/journal.js";
export { ResultStore } from "./jobs/result-store.js";
export { createLogger, silentLogger } from "./log.js";
export { PtyRunner, type PtyRunnerOptions } from "./runner/pty-runner.js";
export type { CommandRunner, RunOutcome, RunRequest, RunStatus } from "./runner/runner.js";
export { AGENT_VERSION } from "./version.js";
