// What every step of one deployment shares: the job, the engine, the record,
// the job's deadline as an abort signal, and the failure type steps throw.
import type { DeployJob } from "@relayctl/proto";
import type { CallOptions, ContainerEngine, EngineOutcome } from "../engine/engine.js";
import type { ImageLedger } from "./image-ledger.js";
import type { StepRecorder } from "./recorder.js";

export interface DeploySettings {
  /** The agent's state dir; git caches live in <stateDir>/deploy/<application id>/. */
  stateDir: string;
  drainSeconds: number;
  network: string | undefined;
  init: boolean;
  /** Podman's crashed containers are the agent's to start again (start-step.ts); absent: false. */
  agentRestarts?: boolean;
  /** This agent's server (its enrollment): a deployed container's `relayctl.server` label. */
  serverId?: string;
}

export interface DeployContext {
  job: DeployJob;
  engine: ContainerEngine;
  rec: StepRecorder;
  /** Aborted when DeployJob.deadline_unix_ms passes. */
  signal: AbortSignal;
  deadlineMs: number;
  /** Every secret of the job: env values, git and registry passwords. */
  secrets: string[];
  settings: DeploySettings;
  /** The images this agent built (a redeploy of a commit finds its image here). */
  ledger: ImageLedger;
}

/** A step's failure; its message is the reason after "<step>: ". */
export class StepError extends Error {
  override name = "StepError";
}

/** CLI call options up to the job's deadline (the signal kills the child at it). */
export function callOptions(ctx: DeployContext): CallOptions {
  const left = Math.ceil((ctx.deadlineMs - Date.now()) / 1000);
  return { deadlineSeconds: Math.max(1, left + 1), signal: ctx.signal, secrets: ctx.secrets };
}

/** The outcome's stdout and stderr for the step log. */
export function outputOf(o: EngineOutcome): string {
  return [o.stdout, o.stderr].filter((s) => s.trim() !== "").join("");
}

/** Throws a StepError unless the CLI ran and exited 0; `what` names the call. */
export function check(o: EngineOutcome, what: string): EngineOutcome {
  if (o.status === "completed" && o.exitCode === 0) return o;
  const last = o.stderr.trim().split("\n").filter(Boolean).at(-1)?.slice(0, 500);
  const how = o.error ? `failed: ${o.error}` : `exited with code ${o.exitCode}`;
  throw new StepError(`${what} ${how}${last ? `: ${last}` : ""}`);
}
