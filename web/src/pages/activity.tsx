// Activity: what CI (and people) did, grouped by run_id with the CI context; the
// operations of a run or of a filter (command, server, status, exit code, output);
// the run's audit events; and the audit chain's verification state. The filters
// live in the address, so a run's page can be linked from a CI log. A command
// that ran and exited non-zero is `completed` in the contract: its badge and the
// run summaries say how it exited, not only that it ended.
import { type Operation, type Run, type Server, get, query } from "../api";
import "./activity.css";
import { navigate, useLocation } from "../router";
import { type Column, Table } from "../table";
import {
  Badge,
  Empty,
  ErrorNote,
  Page,
  Resource,
  Time,
  duration,
  useFilterFields,
  useLoad,
  LogText,
  ShowMore,
  usePageSize,
} from "../ui";

interface Verify {
  ok: boolean;
  events: number;
  head_seq: number | null;
  detail?: string;
}

interface AuditEvent {
  seq: number;
  event_type: string;
  operation_id: string | null;
  created_at: string;
}

const STATUSES = ["running", "completed", "failed", "timeout"];

/** How an operation ended: succeeded (exit 0), exited N, or its status (running, failed, timeout). */
export function OutcomeBadge({ status, exitCode }: { status: string; exitCode: number | null | undefined }) {
  if (status === "completed" && typeof exitCode === "number") {
    if (exitCode === 0) return <Badge status="succeeded" />;
    return (
      <span class="badge badge-exited" title={`the command ran and exited with code ${exitCode}`}>
        exited {exitCode}
      </span>
    );
  }
  return <Badge status={status} />;
}

/** "3 succeeded, 1 exited 1, 1 running": a run's operations by how they ended. */
export function runSummary(
  r: Pick<Run, "statuses" | "exit_codes">,
): { key: string; label: string; n: number }[] {
  const out: { key: string; label: string; n: number }[] = [];
  const codes = r.exit_codes ?? {};
  let counted = 0;
  if (codes["0"]) out.push({ key: "succeeded", label: "succeeded", n: codes["0"] });
  for (const [code, n] of Object.entries(codes).sort(([a], [b]) => Number(a) - Number(b))) {
    if (code === "0") continue;
    out.push({ key: `exited ${code}`, label: code === "none" ? "completed" : `exited ${code}`, n });
  }
  for (const n of Object.values(codes)) counted += n;
  for (const s of STATUSES) {
    const n = r.statuses[s] ?? 0;
    // Completed operations are counted by exit code above; any left (an older control plane) by status.
    const left = s === "completed" ? n - counted : n;
    if (left > 0) out.push({ key: s, label: s, n: left });
  }
  return out;
}
const TYPES = ["exec", "deploy", "restart", "reboot", "registry_login", "registry_logout", "route_sync"];

function ChainState() {
  const v = useLoad(() => get<Verify>("/api/audit/verify"), []);
  if (!v.data)
    return v.error ? <ErrorNote message={v.error} /> : <p class="hint">Checking the audit chain…</p>;
  return (
    <output class={v.data.ok ? "ok-note" : "error"} data-testid="audit-chain">
      {v.data.ok
        ? `Audit chain verified: ${v.data.events} events, intact up to #${v.data.head_seq ?? 0}.`
        : `Audit chain broken: ${v.data.detail ?? "an event does not match its hash"}.`}
    </output>
  );
}

const CONTEXT_KEYS = ["provider", "repository", "workflow", "trigger", "actor", "sha", "ref"];

function ContextLine({ ctx }: { ctx: Record<string, string> | null | undefined }) {
  if (!ctx) return <span class="hint">no CI context</span>;
  const keys = [
    ...CONTEXT_KEYS.filter((k) => ctx[k]),
    ...Object.keys(ctx).filter((k) => !CONTEXT_KEYS.includes(k)),
  ];
  return (
    <span class="ctx">
      {keys.map((k) => (
        <span key={k}>
          <span class="hint">{k}</span>{" "}
          <span class="mono">{k === "sha" ? ctx[k]!.slice(0, 10) : ctx[k]}</span>
        </span>
      ))}
    </span>
  );
}

function Runs() {
  const size = usePageSize(50, 200);
  const runs = useLoad(
    () => get<{ runs: Run[]; next_cursor: string | null }>(`/api/runs?limit=${size.get()}`),
    [],
    10_000,
  );
  return (
    <section aria-labelledby="runs-h">
      <h2 id="runs-h">CI runs</h2>
      <Resource r={runs} what="runs">
        {({ runs: list }) =>
          list.length === 0 ? (
            <Empty>
              <p>
                No runs yet. Operations called with a <code>run_id</code> (the deploy-sync action and{" "}
                <code>relayctl</code> in CI send one) are grouped here.
              </p>
            </Empty>
          ) : (
            <ul class="runs">
              {list.map((r) => (
                <li key={r.run_id}>
                  <a href={`/app/activity${query({ run_id: r.run_id })}`} class="mono">
                    {r.run_id}
                  </a>{" "}
                  <span class="hint">
                    {r.operations} operation{r.operations === 1 ? "" : "s"}, last <Time iso={r.last_at} />
                  </span>{" "}
                  <span class="run-summary" data-testid="run-summary">
                    {runSummary(r).map((p, i) => (
                      <span key={p.key}>
                        {i > 0 && ", "}
                        {p.n}{" "}
                        {p.label === "succeeded" ? (
                          <Badge status="succeeded" />
                        ) : p.label.startsWith("exited") ? (
                          <span class="badge badge-exited">{p.label}</span>
                        ) : (
                          <Badge status={p.label} />
                        )}
                      </span>
                    ))}
                  </span>
                  <div>
                    <ContextLine ctx={r.run_context} />
                  </div>
                </li>
              ))}
            </ul>
          )
        }
      </Resource>
      <ShowMore
        what="runs"
        hasMore={Boolean(runs.data?.next_cursor) && !size.atMax()}
        onMore={() => size.grow(runs.reload)}
      />
    </section>
  );
}

/** The operations table's columns: when, what, where, how it ended and its output. */
const OPERATION_COLUMNS: Column<Operation>[] = [
  { head: "Started", cell: (op) => <Time iso={op.started_at} /> },
  {
    head: "Type",
    cell: (op) =>
      op.deployment ? (
        <a
          href={`/app/applications/${op.deployment.application_id}/deployments/${op.deployment.deployment_id}`}
          title="the deployment's steps and log"
        >
          {op.operation_type}
        </a>
      ) : (
        op.operation_type
      ),
  },
  { head: "Command", class: "mono cmd", cell: (op) => op.command ?? "—" },
  { head: "Server", cell: (op) => op.server_name ?? op.server_id },
  { head: "Status", cell: (op) => <OutcomeBadge status={op.status} exitCode={op.result?.exit_code} /> },
  { head: "Exit", cell: (op) => op.result?.exit_code ?? "—" },
  { head: "Output", cell: (op) => <Output result={op.result} /> },
];

function Output({ result: r }: { result: Operation["result"] }) {
  if (!r || !(r.stdout || r.stderr)) return <span class="hint">{r ? "(none)" : "—"}</span>;
  return (
    <details>
      <summary>Output ({duration(r.duration_ms)})</summary>
      {r.stdout && <LogText text={r.stdout} />}
      {r.stderr && <LogText text={r.stderr} stderr />}
    </details>
  );
}

function Operations({ params }: { params: Record<string, string> }) {
  const key = JSON.stringify(params);
  const size = usePageSize(100, 200);
  const ops = useLoad(
    () =>
      get<{ operations: Operation[]; next_cursor: string | null }>(
        `/api/operations${query({ ...params, limit: size.get() })}`,
      ),
    [key],
    5000,
  );
  const runId = params.run_id;
  const audit = useLoad(
    () =>
      runId
        ? get<{ events: AuditEvent[] }>(`/api/audit${query({ run_id: runId, limit: 200 })}`)
        : Promise.resolve(undefined),
    [runId],
  );
  return (
    <section aria-labelledby="ops-h">
      <h2 id="ops-h">{runId ? `Operations of run ${runId}` : "Operations"}</h2>
      <Resource r={ops} what="operations">
        {({ operations }) =>
          operations.length === 0 ? (
            <Empty>
              <p>No operation matches these filters. Clear them to see every run.</p>
            </Empty>
          ) : (
            <>
              {runId && operations[0]?.run_context && (
                <p>
                  <ContextLine ctx={operations[0].run_context} />
                </p>
              )}
              <Table
                label="Operations"
                testId="operations"
                rows={operations}
                rowKey={(op) => op.operation_id}
                rowHeader={false}
                columns={OPERATION_COLUMNS}
              />
            </>
          )
        }
      </Resource>
      <ShowMore
        what="operations"
        hasMore={Boolean(ops.data?.next_cursor) && !size.atMax()}
        onMore={() => size.grow(ops.reload)}
      />
      {runId && audit.data && (
        <details class="card">
          <summary>
            <h3>Audit events of this run ({audit.data.events.length})</h3>
          </summary>
          <ol class="audit">
            {audit.data.events.map((e) => (
              <li key={e.seq}>
                <span class="mono">#{e.seq}</span> {e.event_type} <Time iso={e.created_at} />
              </li>
            ))}
          </ol>
        </details>
      )}
    </section>
  );
}

function Filters({ params }: { params: Record<string, string> }) {
  const servers = useLoad(() => get<{ servers: Server[] }>("/api/servers"), []);
  const field = useFilterFields(params);
  const submit = (e: Event) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget as HTMLFormElement);
    const next: Record<string, string> = {};
    for (const [k, v] of data) if (typeof v === "string" && v.trim()) next[k] = v.trim();
    navigate(`/app/activity${query(next)}`);
  };
  return (
    <form class="filters" onSubmit={submit} aria-label="Filter operations" key={JSON.stringify(params)}>
      <label>
        Run id
        <input {...field("run_id")} autoComplete="off" spellcheck={false} />
      </label>
      <label>
        Server
        <select {...field("server_id")}>
          <option value="">any</option>
          {(servers.data?.servers ?? []).map((s) => (
            <option key={s.id} value={s.id}>
              {s.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Status
        <select {...field("status")}>
          <option value="">any</option>
          {STATUSES.map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
      </label>
      <label>
        Type
        <select {...field("operation_type")}>
          <option value="">any</option>
          {TYPES.map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
      </label>
      <div class="row">
        <button type="submit" class="primary">
          Show operations
        </button>
        {Object.keys(params).length > 0 && <a href="/app/activity">Clear filters</a>}
      </div>
    </form>
  );
}

export function ActivityPage() {
  const loc = useLocation();
  const params: Record<string, string> = {};
  for (const k of ["run_id", "server_id", "status", "operation_type"]) {
    const v = loc.searchParams.get(k);
    if (v) params[k] = v;
  }
  const filtered = Object.keys(params).length > 0;
  return (
    <Page title="Activity" actions={<a href="/app/audit">Audit log</a>}>
      <ChainState />
      <Filters params={params} />
      {!filtered && <Runs />}
      <Operations params={params} />
    </Page>
  );
}
