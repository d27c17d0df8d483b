// POST /external-deploy/sync, the work behind it: match each deployment entry to
// the session's applications, pass the conflict guard (its claims commit with the
// route_sync operation that carries them: claim-start.ts), send the entries of each
// server to its agent as ONE route-sync job (servers in parallel), and turn the
// agents' reports into `results` and `errors`. Every entry is audited.
import type { Knex } from "knex";
import type { AuditEventInput, Write } from "../audit/audit-log.js";
import type { ApiContext } from "../http/context.js";
import { routeFqdnsOf } from "../applications/hosts.js";
import { applicationIdsOfServer } from "../applications/store.js";
import { claimAndStart } from "./claim-start.js";
import { commitWithEvents } from "./entry-commit.js";
import { type Claim, type StateRow, readStates, releaseWrites } from "./conflict-guard.js";
import {
  DEADLINE_SECONDS,
  type RouteEntry,
  type RouteJobOutcome,
  awaitRouteJob,
  routeJobAudit,
} from "./route-job.js";
import { serverInScope } from "./session-key.js";
import type { SessionRow } from "./sessions.js";

export interface DeploymentEntry {
  container_name: string;
  container_port: number;
  image_tag: string;
  force?: boolean;
}

export interface SyncResult {
  application_id: string;
  container_name: string;
  status: "synced" | "noop" | "conflict" | "drift_recovered";
  signature_hash: string;
  synced_fqdns: string[];
  reason?: string;
}

export interface SyncError {
  container_name: string;
  reason: string;
  application_id?: string;
}

/** An application of a session as the sync reads it. */
export interface SessionApp {
  id: string;
  name: string;
  server_id: string;
  server_name: string;
  linked_container_name: string;
  fqdns: string;
  container_port: number;
  pin_port: number | boolean;
  created_at: number;
}

/** One (entry, application) pair that passed matching. */
interface Work {
  entry: DeploymentEntry;
  app: SessionApp;
}

/** How long the HTTP call waits for the agents' reports. */
const WAIT_MS = 60_000;

/** The session's applications (read by the token's admission, beside the rate limit: admission.ts). */
export async function sessionApplications(db: Knex, session: SessionRow): Promise<SessionApp[]> {
  const ids = JSON.parse(session.application_ids) as string[];
  if (ids.length === 0) return [];
  return db("applications as a")
    .join("servers as s", "s.id", "a.server_id")
    .where({ "a.tenant_id": session.tenant_id })
    .whereIn("a.id", ids)
    .select<SessionApp[]>(
      "a.id",
      "a.name",
      "a.server_id",
      "s.name as server_name",
      "a.linked_container_name",
      "a.fqdns",
      "a.container_port",
      "a.pin_port",
      "a.created_at",
    );
}

function matchEntries(session: SessionRow, apps: SessionApp[], entries: DeploymentEntry[]) {
  const named = new Set(JSON.parse(session.container_names) as string[]);
  const seen = new Set<string>();
  const work: Work[] = [];
  const errors: SyncError[] = [];
  for (const entry of entries) {
    const name = entry.container_name;
    if (seen.has(name)) {
      errors.push({
        container_name: name,
        reason: `container '${name}' is listed more than once in this request`,
      });
      continue;
    }
    seen.add(name);
    const matched = apps.filter((a) => a.linked_container_name === name);
    if (matched.length > 0) {
      for (const app of matched) work.push({ entry, app });
    } else if (named.has(name)) {
      errors.push({
        container_name: name,
        reason: `no application of this session is linked to container '${name}' any more (deleted or renamed since the session was opened)`,
      });
    } else {
      errors.push({
        container_name: name,
        reason: `container '${name}' is not in this session: open a session that names it`,
      });
    }
  }
  return { work, errors };
}

/**
 * Entries the application or the session's key does not allow, before anything
 * is claimed or sent: an application outside the key's server scope (changed
 * since the session was opened), a port other than the one the application pins.
 */
function refuseEntries(matched: Work[], servers: string[], errors: SyncError[]): Work[] {
  return matched.filter(({ entry, app }) => {
    const base = { container_name: entry.container_name, application_id: app.id };
    if (!serverInScope(servers, app.server_id)) {
      errors.push({
        ...base,
        reason: `application '${app.name}' is on server '${app.server_name}', outside the server scope of the key that opened this session`,
      });
      return false;
    }
    const pinned = Number(app.container_port);
    if (Boolean(Number(app.pin_port)) && entry.container_port !== pinned) {
      errors.push({
        ...base,
        reason: `application '${app.name}' pins its port to ${pinned}: container_port ${entry.container_port} is refused`,
      });
      return false;
    }
    return true;
  });
}

/** `servers`: the server scope of the key that opened the session (empty = all). */
export async function syncDeployments(
  ctx: ApiContext,
  session: SessionRow,
  servers: string[],
  entries: DeploymentEntry[],
  ip: string,
  /** The session's applications when their read was started already (admission.ts). */
  applications?: Promise<SessionApp[]>,
) {
  const apps = await (applications ?? sessionApplications(ctx.db, session));
  const matched = matchEntries(session, apps, entries);
  const errors = matched.errors;
  const work = refuseEntries(matched.work, servers, errors);
  const results: SyncResult[] = [];
  const byServer = new Map<string, Work[]>();
  for (const w of work) {
    const list = byServer.get(w.app.server_id) ?? [];
    list.push(w);
    byServer.set(w.app.server_id, list);
  }
  const groups = [...byServer.values()];
  // What each server's claims and job need, read side by side: the guard's rows as they are
  // now (the guess the claims are tried on), each server's applications and route hostnames.
  const [seen, knownLists, hostLists] = await Promise.all([
    readStates(ctx.db, [...new Set(work.map((w) => w.app.id))]),
    Promise.all(groups.map((items) => applicationIdsOfServer(ctx.db, items[0]!.app.server_id))),
    Promise.all(
      groups.map((items) =>
        routeFqdnsOf(
          ctx.db,
          ctx.config.appsUrl,
          items.map(({ app }) => app),
        ),
      ),
    ),
  ]);
  const operations: Record<string, string> = {};
  const states: RouteState[] = [];
  const release: Claim[] = [];
  await Promise.all(
    groups.map(async (items, i) => {
      const outcome = await syncServer(ctx, session, items, ip, knownLists[i]!, hostLists[i]!, seen);
      results.push(...outcome.conflicts);
      if (!outcome.job) return;
      operations[items[0]!.app.server_id] = outcome.job.operationId;
      const collected = collect(outcome.claimed, outcome.job, results, errors);
      states.push(...collected.states);
      release.push(...collected.release);
    }),
  );
  const order = new Map(entries.map((e, i) => [e.container_name, i]));
  const rank = (name: string) => order.get(name) ?? 0;
  results.sort((a, b) => rank(a.container_name) - rank(b.container_name));
  errors.sort((a, b) => rank(a.container_name) - rank(b.container_name));
  // What the agents did, the claims they did not use and the audit of every
  // entry are stored together: one commit, and never one without the others.
  await commitWithEvents(
    ctx.db,
    session.tenant_id,
    (q) => [...storeRouteStates(q, states), ...releaseWrites(q, session.id, release)],
    auditEntries(session, matched.work, results, errors, operations, ip),
  );
  return { session_id: session.id, results, errors };
}

function conflictResult(w: Work, reason: string): SyncResult {
  return {
    application_id: w.app.id,
    container_name: w.entry.container_name,
    status: "conflict",
    signature_hash: "",
    synced_fqdns: [],
    reason,
  };
}

/**
 * One server's entries: the claims and the route_sync operation carrying them in
 * one commit (claim-start.ts), then the job; `job` is undefined when every
 * entry conflicted (nothing was started).
 */
async function syncServer(
  ctx: ApiContext,
  session: SessionRow,
  items: Work[],
  ip: string,
  known: string[],
  /** Each item's route hostnames: its fqdns and its default hostname (RELAYCTL_APPS_URL), as on a deploy. */
  hosts: string[][],
  seen: Map<string, StateRow>,
): Promise<{ conflicts: SyncResult[]; claimed: { w: Work; claim: Claim }[]; job?: RouteJobOutcome }> {
  const first = items[0]!.app;
  const server = { id: first.server_id, name: first.server_name };
  // Keys in code-unit order: the operation's audit event carries them, and its canonical JSON
  // of each is then one JSON.stringify (audit-log.ts).
  const routes: RouteEntry[] = items.map(({ entry, app }, i) => ({
    application_id: app.id,
    container_name: entry.container_name,
    container_port: entry.container_port,
    fqdns: hosts[i]!,
    image_tag: entry.image_tag,
  }));
  const audit = {
    session_id: session.id,
    workflow_run_id: session.workflow_run_id,
    commit_sha: session.commit_sha,
  };
  const { verdicts, op } = await claimAndStart(ctx.db, {
    tenantId: session.tenant_id,
    sessionId: session.id,
    server,
    keyId: session.key_id,
    runId: session.workflow_run_id,
    leaseMs: ctx.ops.leaseMs,
    deadlineSeconds: DEADLINE_SECONDS,
    candidates: items.map((w) => ({
      applicationId: w.app.id,
      applicationName: w.app.name,
      force: w.entry.force === true,
    })),
    audit: (claimed) =>
      routeJobAudit({ audit, routes: routes.filter((r) => claimed.has(r.application_id)), remove: [], ip }),
    seen,
  });
  const conflicts: SyncResult[] = [];
  const claimed: { w: Work; claim: Claim }[] = [];
  for (const w of items) {
    const v = verdicts.get(w.app.id)!;
    if ("conflict" in v) conflicts.push(conflictResult(w, v.conflict));
    else claimed.push({ w, claim: v.claimed });
  }
  if (!op) return { conflicts, claimed };
  const ids = new Set(claimed.map((c) => c.w.app.id));
  const job = await awaitRouteJob(
    ctx,
    op,
    { routes: routes.filter((r) => ids.has(r.application_id)), remove: [], server, known },
    WAIT_MS,
  );
  return { conflicts, claimed, job };
}

interface RouteState {
  application_id: string;
  signature_hash: string;
  container_port: number;
  image_tag: string;
  synced_fqdns: string;
}

/** Adds the server's outcome to results/errors; returns the route state to store and the claims to give back. */
function collect(
  items: { w: Work; claim: Claim }[],
  outcome: RouteJobOutcome,
  results: SyncResult[],
  errors: SyncError[],
): { states: RouteState[]; release: Claim[] } {
  if (outcome.state !== "reported") {
    for (const { w } of items)
      errors.push({
        container_name: w.entry.container_name,
        application_id: w.app.id,
        reason: outcome.reason,
      });
    return { states: [], release: items.map((i) => i.claim) };
  }
  const reported = new Map(outcome.report.routes.map((r) => [r.application_id, r]));
  const release: Claim[] = [];
  const states: RouteState[] = [];
  for (const { w, claim } of items) {
    const r = reported.get(w.app.id);
    if (!r || r.status === "failed") {
      const reason = r?.error
        ? `the agent refused the route: ${r.error}`
        : "the agent did not report this route";
      errors.push({ container_name: w.entry.container_name, application_id: w.app.id, reason });
      release.push(claim);
      continue;
    }
    results.push({
      application_id: w.app.id,
      container_name: w.entry.container_name,
      status: r.status,
      signature_hash: r.signature_hash,
      synced_fqdns: r.fqdns,
    });
    states.push({
      application_id: w.app.id,
      signature_hash: r.signature_hash,
      container_port: w.entry.container_port,
      image_tag: w.entry.image_tag,
      synced_fqdns: JSON.stringify(r.fqdns),
    });
  }
  return { states, release };
}

/** Every row exists (the conflict guard inserted it): one upsert stores them all. */
function storeRouteStates(q: Knex | Knex.Transaction, states: RouteState[]): Write[] {
  if (states.length === 0) return [];
  return [
    q("application_route_state")
      .insert(states)
      .onConflict("application_id")
      .merge(["signature_hash", "container_port", "image_tag", "synced_fqdns"]),
  ];
}

/** One audit event per entry: its outcome, the CI context, the operation that carried it. */
function auditEntries(
  session: SessionRow,
  work: Work[],
  results: SyncResult[],
  errors: SyncError[],
  operations: Record<string, string>,
  ip: string,
) {
  const serverOf = new Map(work.map((w) => [w.app.id, w.app.server_id]));
  const entryOf = new Map(work.map((w) => [w.entry.container_name, w.entry]));
  const events: (Partial<SyncResult> & Partial<SyncError> & { container_name: string; outcome: string })[] = [
    ...results.map((r) => ({ ...r, outcome: r.status })),
    ...errors.map((e) => ({ ...e, outcome: "error" })),
  ];
  return events.map((e): AuditEventInput => {
    const serverId = e.application_id ? serverOf.get(e.application_id) : undefined;
    const entry = entryOf.get(e.container_name);
    return {
      tenantId: session.tenant_id,
      eventType: "external_deploy.sync_entry",
      keyId: session.key_id,
      serverId: serverId ?? null,
      operationId: serverId ? (operations[serverId] ?? null) : null,
      runId: session.workflow_run_id,
      // The keys in code-unit order (a field a result or an error does not have is
      // undefined, and dropped): its canonical JSON is then one JSON.stringify
      // (audit-log.ts), ~10 us less per entry.
      payload: {
        application_id: e.application_id,
        commit_sha: session.commit_sha,
        container_name: e.container_name,
        container_port: entry?.container_port,
        force: entry?.force === true,
        image_tag: entry?.image_tag,
        ip,
        outcome: e.outcome,
        reason: e.reason,
        session_id: session.id,
        signature_hash: e.signature_hash,
        status: e.status,
        synced_fqdns: e.synced_fqdns,
        workflow_run_id: session.workflow_run_id,
      },
    };
  });
}
