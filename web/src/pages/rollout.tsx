// A fleet application's rollouts (issue 33): the list on its page, and one
// rollout's own page, a grid of its servers × the pipeline's steps (each cell the
// step's state in that server's deployment), the rollout's status, why it halted
// and which servers failed at which step, each server's deployment linked. While
// it runs the page asks again every second (GET …/rollouts/{id}, and each
// server's deployment still under way), and stops once it has finished or its
// deadline has passed.
import { useEffect, useRef, useState } from "preact/hooks";
import { type Application, type Deployment, get } from "../api";
import { useWho } from "../session";
import { Table } from "../table";
import { Badge, Empty, ErrorNote, Loading, Page, Resource, Time, messageOf, useLoad, when } from "../ui";
import { appBase } from "./app-paths";
import "./fleets.css";

export interface RolloutServer {
  server_id: string;
  server_name: string;
  batch: number;
  state: string;
  deployment_id: string | null;
  rollback_deployment_id: string | null;
  failed_step: string | null;
  detail: string | null;
  updated_at: string;
}

/**
 * Whether the server's deployment exists: its id is chosen when the rollout is
 * created, before it starts (after its batch's turn and drain), and a skipped
 * server or one that failed to start never has it.
 */
const started = (s: RolloutServer) =>
  s.state !== "pending" && s.state !== "skipped" && !(s.state === "failed" && s.failed_step === "start");

export interface Rollout {
  rollout_id: string;
  application_id: string;
  operation_id: string;
  kind: string;
  status: string;
  detail: string | null;
  run_id: string | null;
  created_at: string;
  finished_at: string | null;
  deadline_at: string;
  servers: RolloutServer[];
}

export const rolloutPath = (appId: string, rolloutId: string) =>
  `/app/applications/${encodeURIComponent(appId)}/rollouts/${encodeURIComponent(rolloutId)}`;
const deploymentPath = (appId: string, id: string) => `/app/applications/${appId}/deployments/${id}`;

const POLL_MS = 1000;
/** The pipeline's steps in their order (agent/src/deploy/recorder.ts); a step not here is added after. */
const STEPS = ["queue", "fetch", "build", "start", "health_check", "switch", "retire"];
const FINISHED = new Set(["completed", "failed", "timeout"]);
/** A server's states that still change after the rollout's own status is final (a halt's rollbacks). */
const MOVING = new Set(["deploying", "rolling_back"]);
/** Finished, and no step runs any more (retire drains after the result): not asked again. */
const done = (d: Deployment | undefined) =>
  d !== undefined && FINISHED.has(d.status) && !(d.steps ?? []).some((s) => s.status === "running");

/** "2 of 3 succeeded, 1 failed". */
function tally(servers: RolloutServer[]): string {
  const n = new Map<string, number>();
  for (const s of servers) n.set(s.state, (n.get(s.state) ?? 0) + 1);
  return [...n].map(([state, k]) => `${k} ${state}`).join(", ");
}

/** The application's rollouts, newest first (on a fleet application's page). */
export function Rollouts({ app }: { app: Application }) {
  const list = useLoad(
    () => get<{ rollouts: Rollout[] }>(`/api/applications/${app.id}/rollouts`),
    [app.id],
    5000,
  );
  return (
    <Resource r={list} what="rollouts">
      {({ rollouts }) =>
        rollouts.length === 0 ? (
          <Empty>
            <p>No rollout yet: a deploy of this application rolls out over its servers.</p>
          </Empty>
        ) : (
          <Table
            label="Rollouts"
            rows={rollouts}
            rowKey={(r) => r.rollout_id}
            rowAttrs={(r) => ({ "data-rollout-id": r.rollout_id })}
            columns={[
              {
                head: "Started",
                cell: (r) => (
                  <a href={rolloutPath(app.id, r.rollout_id)}>
                    <Time iso={r.created_at} />
                  </a>
                ),
              },
              { head: "Kind", cell: (r) => r.kind },
              { head: "Status", cell: (r) => <Badge status={r.status} /> },
              { head: "Servers", cell: (r) => tally(r.servers) },
            ]}
          />
        )
      }
    </Resource>
  );
}

/**
 * The rollout, asked again every second while it runs (until its deadline, past
 * which the sweeper ends it), and the steps of each server's deployment: a
 * finished deployment is not asked again.
 */
function useRollout(tenantId: string, appId: string, rolloutId: string) {
  const [rollout, setRollout] = useState<Rollout>();
  const [steps, setSteps] = useState<Record<string, Deployment>>({});
  const [error, setError] = useState<string>();
  const [stopped, setStopped] = useState(false);
  const known = useRef<Record<string, Deployment>>({});
  useEffect(() => {
    let live = true;
    let timer: number | undefined;
    known.current = {};
    const run = async () => {
      try {
        const r = await get<Rollout>(
          `/api/applications/${encodeURIComponent(appId)}/rollouts/${encodeURIComponent(rolloutId)}`,
        );
        const ids = r.servers
          .flatMap((s) => [started(s) ? s.deployment_id : null, s.rollback_deployment_id])
          .filter(Boolean);
        const open = (ids as string[]).filter((id) => !done(known.current[id]));
        const got = await Promise.all(
          open.map((id) =>
            get<Deployment>(`${appBase(tenantId, appId)}/deployments/${encodeURIComponent(id)}`).catch(
              () => undefined,
            ),
          ),
        );
        for (const d of got) if (d) known.current[d.deployment_id] = d;
        if (!live) return;
        setRollout(r);
        setSteps({ ...known.current });
        setError(undefined);
        const finished =
          r.status !== "running" &&
          !r.servers.some((x) => MOVING.has(x.state)) &&
          open.every((id) => done(known.current[id]));
        const late = Date.now() > Date.parse(r.deadline_at) + 60_000;
        if (finished || late) {
          setStopped(late && !finished);
          return;
        }
      } catch (err) {
        if (live) setError(messageOf(err));
      }
      if (live) timer = window.setTimeout(run, POLL_MS);
    };
    run();
    return () => {
      live = false;
      window.clearTimeout(timer);
    };
  }, [tenantId, appId, rolloutId]);
  return { rollout, steps, error, stopped };
}

function Cell({ d, step }: { d: Deployment | undefined; step: string }) {
  const s = d?.steps?.find((x) => x.name === step);
  if (!s) return <span class="hint">—</span>;
  return <Badge status={s.status} />;
}

function Grid({ r, steps }: { r: Rollout; steps: Record<string, Deployment> }) {
  const names = new Set(STEPS.slice(1));
  for (const d of Object.values(steps)) for (const s of d.steps ?? []) names.add(s.name);
  const order = [...names].sort(
    (a, b) => (STEPS.indexOf(a) + 1 || STEPS.length + 1) - (STEPS.indexOf(b) + 1 || STEPS.length + 1),
  );
  return (
    <Table
      label="Servers and steps"
      caption={`Each server's deployment, step by step${r.status === "running" ? ", updated every second" : ""}`}
      rows={r.servers}
      rowKey={(s) => s.server_id}
      rowAttrs={(s) => ({ "data-server": s.server_name, "data-state": s.state })}
      testId="rollout-grid"
      columns={[
        { head: "Server", cell: (s) => s.server_name },
        { head: "Batch", cell: (s) => String(s.batch + 1) },
        { head: "State", cell: (s) => <Badge status={s.state} /> },
        ...order.map((step) => ({
          head: step.replace("_", " "),
          cell: (s: RolloutServer) => (
            <Cell d={s.deployment_id ? steps[s.deployment_id] : undefined} step={step} />
          ),
        })),
        {
          head: "Deployment",
          cell: (s) => (
            <>
              {s.deployment_id && started(s) ? (
                <a href={deploymentPath(r.application_id, s.deployment_id)}>deployment on {s.server_name}</a>
              ) : (
                "—"
              )}
              {s.rollback_deployment_id && (
                <>
                  {" · "}
                  <a href={deploymentPath(r.application_id, s.rollback_deployment_id)}>
                    rollback on {s.server_name}
                  </a>
                </>
              )}
            </>
          ),
        },
      ]}
    />
  );
}

export function RolloutPage({ appId, rolloutId }: { appId: string; rolloutId: string }) {
  const who = useWho();
  const app = useLoad(() => get<Application>(`/api/applications/${encodeURIComponent(appId)}`), [appId]);
  const { rollout: r, steps, error, stopped } = useRollout(who.tenantId, appId, rolloutId);
  const failed = r?.servers.filter((s) => s.state === "failed" || s.state === "rollback_failed") ?? [];
  return (
    <Page title={`Rollout of ${app.data?.name ?? "the application"}`}>
      <p>
        <a href={`/app/applications/${encodeURIComponent(appId)}`}>← {app.data?.name ?? "The application"}</a>
      </p>
      <ErrorNote message={error} />
      {!r ? (
        !error && <Loading what="the rollout" />
      ) : (
        <>
          <dl class="facts" aria-label="Rollout">
            <dt>Status</dt>
            <dd data-testid="rollout-status">
              <Badge status={r.status} />
            </dd>
            <dt>Kind</dt>
            <dd>{r.kind}</dd>
            <dt>Servers</dt>
            <dd>{tally(r.servers)}</dd>
            <dt>Started</dt>
            <dd>
              <Time iso={r.created_at} />
            </dd>
            <dt>{r.finished_at ? "Finished" : "Deadline"}</dt>
            <dd>{when(r.finished_at ?? r.deadline_at)}</dd>
            <dt>ID</dt>
            <dd class="mono">{r.rollout_id}</dd>
          </dl>
          {(r.status === "halted" || r.status === "failed" || failed.length > 0) && (
            <section class="rollout-halt" aria-labelledby="halt-h">
              <h2 id="halt-h">{r.status === "halted" ? "Why it halted" : "What failed"}</h2>
              {r.detail && <p data-testid="rollout-detail">{r.detail}</p>}
              {failed.length > 0 && (
                <ul data-testid="rollout-failed">
                  {failed.map((s) => (
                    <li key={s.server_id}>
                      {s.server_name}: {s.state}
                      {s.failed_step ? ` at step ${s.failed_step}` : ""}
                      {s.detail ? ` (${s.detail})` : ""}
                    </li>
                  ))}
                </ul>
              )}
            </section>
          )}
          {stopped && (
            <p class="hint">
              Past its deadline and still running: no longer refreshed. Reload the page to ask again.
            </p>
          )}
          <h2>Servers</h2>
          <Grid r={r} steps={steps} />
        </>
      )}
    </Page>
  );
}
