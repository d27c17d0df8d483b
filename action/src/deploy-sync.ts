// One run of the action: read the services, open an external-deploy session,
// sync the matched ones, report, and delete the session whatever happened.
import { readFile } from "node:fs/promises";
import { type Deployment, RelayctlClient, type Session } from "./client.js";
import { type ServiceTarget, TargetError, composeTargets, serviceListTargets } from "./compose.js";
import type { ActionInputs } from "./inputs.js";
import { type RunOutcome, TABLE_HEADER, failureOf, formatTable, outputsOf, reportRows } from "./report.js";

/** What the action needs from the runner (main.ts binds it to @actions/core). */
export interface ActionIO {
  info(message: string): void;
  warning(message: string): void;
  setSecret(secret: string): void;
  setOutput(name: string, value: string): void;
  setFailed(message: string): void;
  /** Appends the run's table to the job summary, when the runner has one. */
  writeSummary(title: string, header: string[], rows: string[][], footer: string): Promise<void>;
}

type Env = Record<string, string | undefined>;

async function readTargets(inputs: ActionInputs, env: Env): Promise<ServiceTarget[]> {
  let targets: ServiceTarget[];
  if (inputs.composeFile) {
    let text: string;
    try {
      text = await readFile(inputs.composeFile, "utf8");
    } catch (err) {
      throw new TargetError(`compose_file '${inputs.composeFile}': ${(err as Error).message}`, {
        cause: err,
      });
    }
    try {
      targets = composeTargets(text, env, inputs.composePort);
    } catch (err) {
      throw new TargetError(`compose_file '${inputs.composeFile}': ${(err as Error).message}`, {
        cause: err,
      });
    }
  } else {
    targets = serviceListTargets(inputs.services ?? []);
  }
  const seen = new Set<string>();
  for (const t of targets) {
    if (seen.has(t.name)) throw new TargetError(`service '${t.name}' is listed twice`);
    seen.add(t.name);
  }
  return targets;
}

function defaultImage(name: string, inputs: ActionInputs): string {
  return inputs.imageTag ?? `${name}:${inputs.commitSha?.slice(0, 12) ?? "latest"}`;
}

function deploymentsFor(targets: ServiceTarget[], session: Session, inputs: ActionInputs, io: ActionIO) {
  const deployments: Deployment[] = [];
  // One entry per service, even when several applications link it: the sync
  // applies an entry to every application of the session linked to that name.
  for (const target of targets) {
    const app = session.applications.find((a) => a.linked_container_name === target.name);
    if (!app) continue;
    if (target.note) io.info(`${target.name}: ${target.note}`);
    if (target.port === undefined)
      io.info(`${target.name}: no port given; using the application's ${app.container_port}`);
    deployments.push({
      container_name: target.name,
      container_port: target.port ?? app.container_port,
      image_tag: target.image ?? defaultImage(target.name, inputs),
      force: inputs.force,
    });
  }
  return deployments;
}

async function report(outcome: RunOutcome, io: ActionIO): Promise<void> {
  const rows = reportRows(outcome);
  io.info(formatTable(TABLE_HEADER, rows));
  for (const [name, value] of Object.entries(outputsOf(outcome))) io.setOutput(name, value);
  const footer = `session ${outcome.sessionId}${outcome.force ? " · force: conflict guard overridden" : ""}`;
  await io.writeSummary("relayctl deploy-sync", TABLE_HEADER, rows, footer);
}

/** Runs the action; returns the outcome (undefined when it stopped before syncing). */
export async function deploySync(
  inputs: ActionInputs,
  io: ActionIO,
  env: Env,
): Promise<RunOutcome | undefined> {
  const targets = await readTargets(inputs, env);
  io.info(`services: ${targets.map((t) => t.name).join(", ")}`);
  const client = new RelayctlClient(inputs.url, inputs.timeoutMs);
  const session = await client.openSession(inputs.apiKey, {
    container_names: targets.map((t) => t.name),
    workflow_run_id: inputs.workflowRunId,
    commit_sha: inputs.commitSha,
  });
  io.setSecret(session.session_token);
  io.setOutput("session_id", session.session_id);
  try {
    for (const name of session.unmatched) {
      io.warning(
        `service '${name}' matches no application's linked_container_name; its routes are not synced`,
      );
    }
    const sync = await client.sync(session.session_token, deploymentsFor(targets, session, inputs, io));
    const outcome = {
      sessionId: session.session_id,
      sync,
      unmatched: session.unmatched,
      force: inputs.force,
    };
    await report(outcome, io);
    const failure = failureOf(outcome);
    if (failure) io.setFailed(failure);
    return outcome;
  } finally {
    await client.deleteSession(session.session_token, session.session_id).then(
      () => io.info(`session ${session.session_id} deleted`),
      (err: Error) => io.warning(`could not delete session ${session.session_id}: ${err.message}`),
    );
  }
}
