// POST /external-deploy/sync, the work behind it: match each deployment entry to
// the session's applications, pass the conflict guard (its claims commit with the
// route_sync operation that carries them: claim-start.ts), send the entries of each
// server to its agent as ONE route-sync job (servers in parallel), and turn the
// agents' reports into `results` and `errors`. Every entry is audited, with its
// outcome, in one event per server the sync touched: a server's job settles its
// entries with the operation's completion (settle.ts), and what no completion
// settled is stored here, in the sync's last commit.
import type { Knex } from "knex";
import type { AuditEventInput, Write } from "../audit/audit-log.js";
import type { ApiContext } from "../http/context.js";
import { routeFqdnsOf } from "../applications/hosts.js";
import { applicationIdsOfServer } from "../applications/store.js";
import { claimAndStart } from "./claim-start.js";
import { commitWithEvents } from "./entry-commit.js";
import { type StateRow, readStates } from "./conflict-guard.js";
import { DEADLINE_SECONDS, type RouteEntry, awaitRouteJob, routeJobAudit } from "./route-job.js";
import {
  type AuditLine,
  type PlanEntry,
  type SessionFacts,
  type SyncError,
  type SyncPlan,
  type SyncResult,
  auditLine,
  settleServer,
  syncEvent,
} from "./settle.js";

export type { SyncError, SyncResult } from "./settle.js";
import { serverInScope } from "./session-key.js";
import type { SessionRow } from "./sessions.js";

export interface DeploymentEntry {
  container_name: string;
  container_port: number;
  image_tag: string;
  force?: boolean;
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
  const order = new Map<string, number>();
  entries.forEach((e, i) => order.set(e.container_name, order.get(e.container_name) ?? i));
  const rank = (name: string) => order.get(name) ?? 0;
  const asked = new Map(entries.map((e) => [e.container_name, e]));
  const matched = matchEntries(session, apps, entries);
  const errors = matched.errors;
  const work = refuseEntries(matched.work, servers, errors);
  // The entries decided before any job, as audit lines by server (null: they reached none).
  const serverOf = new Map(matched.work.map((w) => [w.app.id, w.app.server_id]));
  const decided = new Map<string | null, AuditLine[]>();
  for (const e of errors) {
    const serverId = (e.application_id && serverOf.get(e.application_id)) || null;
    const lines = decided.get(serverId) ?? [];
    lines.push(auditLine(asked.get(e.container_name), e, rank(e.container_name)));
    decided.set(serverId, lines);
  }
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
  const facts: SessionFacts = {
    session_id: session.id,
    key_id: session.key_id,
    workflow_run_id: session.workflow_run_id,
    commit_sha: session.commit_sha,
    ip,
  };
  // What no operation's completion settled: stored here, in the sync's last commit.
  const events: AuditEventInput[] = [];
  const writes: ((q: Knex | Knex.Transaction) => Write[])[] = [];
  await Promise.all(
    groups.map(async (items, i) => {
      const serverId = items[0]!.app.server_id;
      const lines = decided.get(serverId) ?? [];
      decided.delete(serverId);
      const outcome = await syncServer(ctx, items, knownLists[i]!, hostLists[i]!, seen, {
        session,
        facts,
        lines,
        rank,
      });
      results.push(...outcome.results);
      errors.push(...outcome.errors);
      if (outcome.settled) return;
      events.push(outcome.event);
      if (outcome.writes) writes.push(outcome.writes);
    }),
  );
  // Servers whose every entry was refused, and the entries that reached no server.
  for (const [serverId, lines] of decided)
    events.push(syncEvent(session.tenant_id, facts, serverId, null, lines));
  results.sort((a, b) => rank(a.container_name) - rank(b.container_name));
  errors.sort((a, b) => rank(a.container_name) - rank(b.container_name));
  // What the agents did, the claims they did not use and the audit of every entry are
  // stored together (here or with the completion): one commit, never one without the others.
  if (events.length > 0)
    await commitWithEvents(ctx.db, session.tenant_id, (q) => writes.flatMap((w) => w(q)), events);
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

interface ServerSync {
  results: SyncResult[];
  errors: SyncError[];
  /** The server's audit event, and the writes of its outcome: stored by the api unless `settled`. */
  event: AuditEventInput;
  writes?: (q: Knex | Knex.Transaction) => Write[];
  /** The operation's completion stored them already. */
  settled: boolean;
}

/**
 * One server's entries: the claims and the route_sync operation carrying them in
 * one commit (claim-start.ts), then the job, whose completion settles the entries
 * when it can (settle.ts); nothing is started when every entry conflicted.
 */
async function syncServer(
  ctx: ApiContext,
  items: Work[],
  known: string[],
  /** Each item's route hostnames: its fqdns and its default hostname (RELAYCTL_APPS_URL), as on a deploy. */
  hosts: string[][],
  seen: Map<string, StateRow>,
  sync: {
    session: SessionRow;
    facts: SessionFacts;
    /** The server's entries refused before the job, as audit lines. */
    lines: AuditLine[];
    rank: (name: string) => number;
  },
): Promise<ServerSync> {
  const { session, facts, rank } = sync;
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
      routeJobAudit({
        audit,
        routes: routes.filter((r) => claimed.has(r.application_id)),
        remove: [],
        ip: facts.ip,
      }),
    seen,
  });
  const conflicts: SyncResult[] = [];
  const lines = [...sync.lines];
  const claimed: PlanEntry[] = [];
  for (const w of items) {
    const v = verdicts.get(w.app.id)!;
    const name = w.entry.container_name;
    if ("conflict" in v) {
      const c = conflictResult(w, v.conflict);
      conflicts.push(c);
      lines.push(auditLine(w.entry, c, rank(name)));
      continue;
    }
    claimed.push({
      rank: rank(name),
      application_id: w.app.id,
      container_name: name,
      container_port: w.entry.container_port,
      image_tag: w.entry.image_tag,
      force: w.entry.force === true,
      claim: v.claimed,
    });
  }
  if (!op) {
    const event = syncEvent(session.tenant_id, facts, server.id, null, lines);
    return { results: conflicts, errors: [], event, settled: false };
  }
  const plan: SyncPlan = {
    ...facts,
    server_id: server.id,
    server_name: server.name,
    entries: claimed,
    decided: lines,
  };
  const ids = new Set(claimed.map((c) => c.application_id));
  const job = await awaitRouteJob(
    ctx,
    op,
    { routes: routes.filter((r) => ids.has(r.application_id)), remove: [], server, known },
    WAIT_MS,
    plan,
  );
  const settled = settleServer(session.tenant_id, plan, job);
  return {
    results: [...conflicts, ...settled.results],
    errors: settled.errors,
    event: settled.event,
    writes: settled.writes,
    settled: job.settled === true,
  };
}
