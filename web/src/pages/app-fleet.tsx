// The application form's fleet part (issue 33, docs/fleets.md): where it runs (its
// server alone as before, a list of servers, or a label selector whose matching
// servers are shown live from the servers' labels), and its rollouts' default
// strategy. Its own state beside the form's; the body carries `placement` and
// `rollout_strategy` only as the API stores them, so an unchanged form sends nothing.
import type { Application, Placement, RolloutStrategy, Server } from "../api";
import type { FieldError, FieldSpec } from "./field-errors";
import { LabelChips } from "./server-labels";
import "./fleets.css";

export interface FleetValues {
  placement_kind: "single" | "servers" | "selector";
  /** Server ids, in the servers list's order (a placement list deploys in its order). */
  placement_servers: string[];
  selector: string;
  max_parallel: string;
  max_failures: string;
  pause_seconds: string;
  drain_seconds: string;
  canary: boolean;
  auto_rollback: boolean;
}
export type FleetName = keyof FleetValues;

export const FLEET_SPECS: Record<string, FieldSpec<FleetName>> = {
  placement: { field: "placement_kind", label: "Placement" },
  "placement.servers": { field: "placement_servers", label: "Servers" },
  "placement.selector": { field: "selector", label: "Label selector" },
  rollout_strategy: { field: "max_parallel", label: "Rollout strategy" },
  "rollout_strategy.max_parallel": { field: "max_parallel", label: "Servers at once" },
  "rollout_strategy.max_failures": { field: "max_failures", label: "Failures tolerated" },
  "rollout_strategy.pause_seconds": { field: "pause_seconds", label: "Pause between batches" },
  "rollout_strategy.drain_seconds": { field: "drain_seconds", label: "Drain before each server" },
};

/** The servers a placement list names, as ids (a name is matched too: the API takes both). */
function idsOf(entries: string[], servers: Server[]): string[] {
  return entries.map((e) => servers.find((s) => s.id === e || s.name === e)?.id ?? e);
}

export function fleetValuesOf(app: Application | undefined, servers: Server[]): FleetValues {
  const placement = app?.placement ?? null;
  const st = app?.rollout_strategy ?? {};
  return {
    placement_kind: !placement ? "single" : "servers" in placement ? "servers" : "selector",
    placement_servers: placement && "servers" in placement ? idsOf(placement.servers, servers) : [],
    selector: placement && "selector" in placement ? placement.selector : "",
    max_parallel: st.max_parallel === undefined ? "1" : String(st.max_parallel),
    max_failures: String(st.max_failures ?? 0),
    pause_seconds: String(st.pause_seconds ?? 0),
    drain_seconds: String(st.drain_seconds ?? 0),
    canary: st.canary ?? false,
    auto_rollback: st.auto_rollback ?? true,
  };
}

/** `{placement, rollout_strategy}` as the API takes them; a strategy holds only what differs from the defaults. */
export function fleetBodyOf(v: FleetValues, app: Application | undefined, servers: Server[]) {
  if (app?.preview_of) return {};
  // A new single-server application's body stays as it was before fleets.
  if (v.placement_kind === "single") return app ? { placement: null, rollout_strategy: null } : {};
  let placement: Placement;
  if (v.placement_kind === "selector") placement = { selector: v.selector.trim() };
  else {
    const stored = app?.placement && "servers" in app.placement ? app.placement : null;
    // The same servers as stored (perhaps by name): sent as stored, so nothing changes.
    const same =
      stored && JSON.stringify(idsOf(stored.servers, servers)) === JSON.stringify(v.placement_servers);
    placement = same ? stored : { servers: v.placement_servers };
  }
  const strategy: RolloutStrategy = {};
  const parallel = v.max_parallel.trim();
  if (parallel && parallel !== "1")
    strategy.max_parallel = /^\d+$/.test(parallel) ? Number(parallel) : parallel;
  if (v.max_failures.trim() && Number(v.max_failures) !== 0) strategy.max_failures = Number(v.max_failures);
  if (v.pause_seconds.trim() && Number(v.pause_seconds) !== 0)
    strategy.pause_seconds = Number(v.pause_seconds);
  if (v.drain_seconds.trim() && Number(v.drain_seconds) !== 0)
    strategy.drain_seconds = Number(v.drain_seconds);
  if (v.canary) strategy.canary = true;
  if (!v.auto_rollback) strategy.auto_rollback = false;
  return { placement, rollout_strategy: Object.keys(strategy).length > 0 ? strategy : null };
}

/** The servers whose labels match every key=value pair of a selector; undefined while it does not parse. */
export function matching(selector: string, servers: Server[]): Server[] | undefined {
  const pairs = selector.split(",").map((p) => p.split("="));
  if (pairs.some((p) => p.length !== 2 || !p[0]?.trim())) return undefined;
  return servers.filter((s) => pairs.every(([k, val]) => s.labels?.[k!.trim()] === val!.trim()));
}

function SelectorPreview({ selector, servers }: { selector: string; servers: Server[] }) {
  const found = selector.trim() ? matching(selector, servers) : undefined;
  let text: string;
  if (!selector.trim()) text = "Type a selector to see which servers it matches.";
  else if (!found) text = "Not a selector yet: key=value pairs separated by commas.";
  else if (found.length === 0) text = "Matches no server now: a deploy would be refused.";
  else text = `Matches ${found.length} server${found.length === 1 ? "" : "s"} now:`;
  return (
    <div class="selector-preview" aria-live="polite" data-testid="selector-matches">
      <p class="hint">{text}</p>
      {found && found.length > 0 && (
        <ul class="chips" aria-label="Matching servers">
          {found.map((s) => (
            <li key={s.id} class="chip">
              {s.name}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function FleetFields({
  v,
  set,
  servers,
  p,
  error,
  errId,
}: {
  v: FleetValues;
  set: <K extends FleetName>(name: K, value: FleetValues[K]) => void;
  servers: Server[];
  p: string;
  error: FieldError<string> | undefined;
  errId: string;
}) {
  const bad = (name: FleetName) => error?.field === name;
  const aria = (name: FleetName, hint?: string) => ({
    "aria-invalid": bad(name) ? ("true" as const) : undefined,
    "aria-describedby": [hint ?? "", bad(name) ? errId : ""].filter(Boolean).join(" ") || undefined,
  });
  const note = (name: FleetName) =>
    bad(name) ? (
      <span class="field-error" id={errId}>
        {error?.text}
      </span>
    ) : null;
  const text = (
    name: "max_parallel" | "max_failures" | "pause_seconds" | "drain_seconds",
    label: string,
    hint: string,
  ) => (
    <div class="field">
      <label for={`${p}-${name}`}>{label}</label>
      <input
        id={`${p}-${name}`}
        name={name}
        value={v[name]}
        onInput={(e) => set(name, e.currentTarget.value)}
        inputMode={name === "max_parallel" ? "text" : "numeric"}
        autoComplete="off"
        {...aria(name, `${p}-${name}-hint`)}
      />
      <span class="hint" id={`${p}-${name}-hint`}>
        {hint}
      </span>
      {note(name)}
    </div>
  );
  return (
    <fieldset>
      <legend>Where it runs</legend>
      <div class="field">
        <label for={`${p}-placement_kind`}>Runs on</label>
        <select
          id={`${p}-placement_kind`}
          name="placement_kind"
          value={v.placement_kind}
          onChange={(e) => set("placement_kind", e.currentTarget.value as FleetValues["placement_kind"])}
          {...aria("placement_kind")}
        >
          <option value="single">its server alone</option>
          <option value="servers">a list of servers</option>
          <option value="selector">the servers matching a label selector</option>
        </select>
        {note("placement_kind")}
      </div>
      {v.placement_kind === "servers" && (
        <fieldset {...aria("placement_servers")}>
          <legend>Servers (deployed in this order)</legend>
          {servers.map((s) => (
            <label class="check" key={s.id}>
              <input
                type="checkbox"
                name="placement_servers"
                value={s.id}
                checked={v.placement_servers.includes(s.id)}
                onChange={(e) =>
                  set(
                    "placement_servers",
                    e.currentTarget.checked
                      ? servers
                          .filter((x) => x.id === s.id || v.placement_servers.includes(x.id))
                          .map((x) => x.id)
                      : v.placement_servers.filter((id) => id !== s.id),
                  )
                }
              />
              {s.name} <LabelChips labels={s.labels} none="" />
            </label>
          ))}
          {note("placement_servers")}
        </fieldset>
      )}
      {v.placement_kind === "selector" && (
        <div class="field">
          <label for={`${p}-selector`}>Label selector</label>
          <input
            id={`${p}-selector`}
            name="selector"
            value={v.selector}
            onInput={(e) => set("selector", e.currentTarget.value)}
            placeholder="region=eu,role=web"
            autoComplete="off"
            spellcheck={false}
            {...aria("selector", `${p}-selector-hint`)}
          />
          <span class="hint" id={`${p}-selector-hint`}>
            Every key=value pair must match a server's labels. Resolved at each deploy: a label change moves
            the application at its next deploy.
          </span>
          {note("selector")}
          <SelectorPreview selector={v.selector} servers={servers} />
        </div>
      )}
      {v.placement_kind !== "single" && (
        <fieldset>
          <legend>Rollout strategy</legend>
          <div class="grid">
            {text("max_parallel", "Servers at once", "A number, or a percentage of the fleet such as 25%.")}
            {text("max_failures", "Failures tolerated", "One more failed server halts the rollout.")}
            {text("pause_seconds", "Pause between batches (seconds)", "0 to 3600.")}
            {text(
              "drain_seconds",
              "Drain before each server (seconds)",
              "0 to 600; 0 drains nothing. For a load balancer: each server's proxy answers 503 on /.well-known/relayctl/health this long before that server's deployment (and until it ends). Set at least the balancer's check interval × its unhealthy threshold.",
            )}
          </div>
          <label class="check">
            <input
              type="checkbox"
              name="canary"
              checked={v.canary}
              onChange={(e) => set("canary", e.currentTarget.checked)}
            />
            Canary: the first batch is one server alone
          </label>
          <label class="check">
            <input
              type="checkbox"
              name="auto_rollback"
              checked={v.auto_rollback}
              onChange={(e) => set("auto_rollback", e.currentTarget.checked)}
            />
            On a halt, roll the servers already switched back to their previous release
          </label>
        </fieldset>
      )}
    </fieldset>
  );
}
