// The audit log: every event of the organization's audit trail, newest first,
// with who acted on every row, filtered by kind of event, actor, server,
// application and time. Sign-ins, keys, members and settings changes are here
// as well as operations; a deploy operation leads to its deployment. The
// filters live in the address, so a filtered view can be linked.
import { useState } from "preact/hooks";
import { type Application, type Server, get, query } from "../api";
import { navigate, useLocation } from "../router";
import { type Column, Table } from "../table";
import { Empty, ErrorNote, Page, Resource, Time, useFilterFields, useLoad } from "../ui";
import { OutcomeBadge } from "./activity";
import "./audit.css";

export interface AuditActor {
  type: string;
  id: string | null;
  name: string;
}

export interface AuditRow {
  seq: number;
  event_type: string;
  operation_id: string | null;
  server_id: string | null;
  run_id: string | null;
  created_at: string;
  payload: Record<string, unknown>;
  actor?: AuditActor;
  outcome?: { status: string; exit_code: number | null };
}

interface AuditPage {
  events: AuditRow[];
  next_cursor: string | null;
}

/** The kinds of event a person looks for, as the API's event_type families. */
const KINDS: { value: string; label: string }[] = [
  { value: "operation", label: "Operations (exec, deploy, restart…)" },
  { value: "auth,oauth", label: "Sign-ins and sessions" },
  { value: "api_key,automation_key", label: "Keys" },
  { value: "user", label: "Members and invites" },
  { value: "application", label: "Application settings" },
  { value: "server,agent,join_token,server_provider", label: "Servers and agents" },
  { value: "registry_credential", label: "Registry credentials" },
  { value: "github", label: "GitHub" },
  { value: "external_deploy", label: "External deploys" },
  { value: "rate_limit", label: "Rate limits" },
];

const FILTERS = ["event_type", "actor", "server_id", "application_id", "since", "until"] as const;
const PAGE = 50;

const ACTOR_KINDS: Record<string, string> = {
  user: "person",
  api_key: "API key",
  automation_key: "automation key",
  oauth_token: "OAuth token",
  web_session: "session",
  operator: "operator",
  agent: "agent",
  github: "GitHub",
  system: "relayctl",
};

const str = (v: unknown) => (typeof v === "string" ? v : undefined);

/** What the event was about, in a few words, with a link where there is a page. */
function Subject({ e }: { e: AuditRow }) {
  const p = e.payload;
  const appId = str(p.application_id);
  const appName = str(p.application_name);
  const deploymentId = str(p.deployment_id);
  if (e.event_type === "operation.deploy" && appId && deploymentId)
    return (
      <a href={`/app/applications/${appId}/deployments/${deploymentId}`}>
        deployment of {appName ?? "the application"}
        {str(p.commit_ref) ? ` @ ${p.commit_ref}` : ""}
      </a>
    );
  if (typeof p.command === "string") return <span class="mono">{p.command}</span>;
  if (appId) return <a href={`/app/applications/${appId}`}>{appName ?? appId}</a>;
  const what = str(p.key_name) ?? str(p.email) ?? str(p.server_name) ?? str(p.name) ?? str(p.method);
  return what ? <span>{what}</span> : <span class="hint">—</span>;
}

function ActorCell({ actor }: { actor: AuditActor | undefined }) {
  if (!actor) return <span class="hint">unknown</span>;
  const label = (
    <>
      {actor.name} <span class="hint">({ACTOR_KINDS[actor.type] ?? actor.type})</span>
    </>
  );
  // An actor with an id filters the log to what they did.
  return actor.id ? (
    <a href={`/app/audit${query({ actor: actor.id })}`} title={`only what ${actor.name} did`}>
      {label}
    </a>
  ) : (
    label
  );
}

function columns(servers: Map<string, string>): Column<AuditRow>[] {
  return [
    { head: "Time", cell: (e) => <Time iso={e.created_at} /> },
    { head: "Event", class: "mono event", cell: (e) => e.event_type },
    { head: "Actor", cell: (e) => <ActorCell actor={e.actor} /> },
    {
      head: "Server",
      cell: (e) => (e.server_id ? (servers.get(e.server_id) ?? e.server_id.slice(0, 8)) : "—"),
    },
    { head: "Subject", class: "cmd", cell: (e) => <Subject e={e} /> },
    {
      head: "Outcome",
      cell: (e) =>
        e.outcome ? <OutcomeBadge status={e.outcome.status} exitCode={e.outcome.exit_code} /> : "—",
    },
  ];
}

function Filters({ params }: { params: Record<string, string> }) {
  const servers = useLoad(() => get<{ servers: Server[] }>("/api/servers"), []);
  const apps = useLoad(() => get<{ applications: Application[] }>("/api/applications"), []);
  const field = useFilterFields(params);
  const submit = (ev: Event) => {
    ev.preventDefault();
    const data = new FormData(ev.currentTarget as HTMLFormElement);
    const next: Record<string, string> = {};
    for (const [k, v] of data) if (typeof v === "string" && v.trim()) next[k] = v.trim();
    navigate(`/app/audit${query(next)}`);
  };
  return (
    <form class="filters" onSubmit={submit} aria-label="Filter audit events" key={JSON.stringify(params)}>
      <label>
        Kind
        <select {...field("event_type")}>
          <option value="">any</option>
          {KINDS.map((k) => (
            <option key={k.value} value={k.value}>
              {k.label}
            </option>
          ))}
          {params.event_type && !KINDS.some((k) => k.value === params.event_type) && (
            <option value={params.event_type}>{params.event_type}</option>
          )}
        </select>
      </label>
      <label>
        Actor id
        <input
          {...field("actor")}
          autoComplete="off"
          spellcheck={false}
          placeholder="a person's or key's id"
        />
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
        Application
        <select {...field("application_id")}>
          <option value="">any</option>
          {(apps.data?.applications ?? []).map((a) => (
            <option key={a.id} value={a.id}>
              {a.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        From
        <input type="date" {...field("since")} />
      </label>
      <label>
        To
        <input type="date" {...field("until")} />
      </label>
      <div class="row">
        <button type="submit" class="primary">
          Show events
        </button>
        {Object.keys(params).length > 0 && <a href="/app/audit">Clear filters</a>}
      </div>
    </form>
  );
}

function Events({ params }: { params: Record<string, string> }) {
  const key = JSON.stringify(params);
  const servers = useLoad(() => get<{ servers: Server[] }>("/api/servers"), []);
  const first = useLoad(
    () => get<AuditPage>(`/api/audit${query({ ...params, order: "desc", limit: PAGE })}`),
    [key],
    15_000,
  );
  // Older pages, fetched on demand after the first (which refreshes on its own).
  const [older, setOlder] = useState<{ key: string; events: AuditRow[]; next: string | null }>({
    key,
    events: [],
    next: null,
  });
  const [moreError, setMoreError] = useState<string | undefined>();
  const mine = older.key === key ? older : { key, events: [], next: null };
  const names = new Map((servers.data?.servers ?? []).map((s) => [s.id, s.name]));
  const cursor = mine.events.length > 0 ? mine.next : (first.data?.next_cursor ?? null);
  const more = async () => {
    if (!cursor) return;
    try {
      const page = await get<AuditPage>(
        `/api/audit${query({ ...params, order: "desc", limit: PAGE, cursor })}`,
      );
      setOlder({ key, events: [...mine.events, ...page.events], next: page.next_cursor });
      setMoreError(undefined);
    } catch (err) {
      setMoreError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <Resource r={first} what="audit events">
      {({ events }) =>
        events.length === 0 ? (
          <Empty>
            <p>No audit event matches these filters.</p>
          </Empty>
        ) : (
          <>
            <Table
              label="Audit events"
              caption="Audit events, newest first"
              testId="audit-events"
              rows={[...events, ...mine.events.filter((e) => e.seq < (events.at(-1)?.seq ?? 0))]}
              rowKey={(e) => String(e.seq)}
              rowAttrs={(e) => ({ "data-seq": String(e.seq), "data-event": e.event_type })}
              rowHeader={false}
              columns={columns(names)}
            />
            <ErrorNote message={moreError} />
            {cursor && (
              <p>
                <button type="button" onClick={more}>
                  Show older events
                </button>
              </p>
            )}
          </>
        )
      }
    </Resource>
  );
}

export function AuditPage() {
  const loc = useLocation();
  const params: Record<string, string> = {};
  for (const k of FILTERS) {
    const v = loc.searchParams.get(k);
    if (v) params[k] = v;
  }
  return (
    <Page title="Audit log" actions={<a href="/app/activity">Activity</a>}>
      <p class="hint">
        Everything done in this organization, newest first: operations, sign-ins, keys, members and settings,
        each with who did it.
      </p>
      <Filters params={params} />
      <Events params={params} />
    </Page>
  );
}
