// One deployment: its status, commit and steps, and while it runs its live log.
// Steps, badge and log come from one stream, the deployment log's server-sent
// events (EventSource sends the session cookie): `progress` replays everything
// recorded, then each new message (whole lines, with their step and time);
// `state` is the deployment's view whenever its status changes; `end` the final
// view, sent once no step runs any more (retire drains after the result). The
// page's first load only decides whether to follow and fills the page until the
// stream speaks, so nothing on it is a stale snapshot (issue 31, defect 2).
import { useEffect, useState } from "preact/hooks";
import { type Deployment, type Step, get } from "../api";
import { useWho } from "../session";
import { AppUrl, Badge, ErrorNote, LogBox, LogText, Page, Resource, Time, duration, useLoad } from "../ui";
import { appBase } from "./application";

interface Progress {
  seq: number;
  step: string;
  status: string;
  log: string;
  at: string | null;
}

interface LiveStep extends Step {
  started: number | null;
}

type StreamState = "idle" | "live" | "ended" | "lost";

const FINISHED = new Set(["completed", "failed", "timeout"]);

/** The steps as the progress so far tells them, in the order they began. */
function fold(steps: LiveStep[], p: Progress): LiveStep[] {
  const at = p.at ? Date.parse(p.at) : null;
  const i = steps.findIndex((s) => s.name === p.step);
  const before =
    i >= 0 ? steps[i]! : { name: p.step, status: p.status, started: at, duration_ms: null, log: "" };
  const ended = p.status !== "running" && before.started !== null && at !== null;
  const step = {
    ...before,
    status: p.status,
    log: before.log + p.log,
    duration_ms: ended ? at - (before.started ?? at) : before.duration_ms,
  };
  return i >= 0 ? steps.map((s, j) => (j === i ? step : s)) : [...steps, step];
}

function useDeploymentStream(url: string, follow: boolean) {
  const [text, setText] = useState("");
  const [steps, setSteps] = useState<LiveStep[] | undefined>(undefined);
  const [view, setView] = useState<Deployment | undefined>(undefined);
  const [state, setState] = useState<StreamState>("idle");
  useEffect(() => {
    if (!follow) return;
    const source = new EventSource(url);
    let last = Number.NEGATIVE_INFINITY;
    let step: string | undefined;
    setState("live");
    source.addEventListener("progress", (e) => {
      const p = JSON.parse((e as MessageEvent).data) as Progress;
      // A reconnect replays from the start: what was seen already is skipped.
      if (p.seq <= last) return;
      last = p.seq;
      if (p.log) {
        // The step's name where the step changes; each message is whole lines.
        const head = p.step === step ? "" : `── ${p.step} ──\n`;
        step = p.step;
        setText((all) => all + head + (p.log.endsWith("\n") ? p.log : `${p.log}\n`));
      }
      setSteps((all) => fold(all ?? [], p));
    });
    source.addEventListener("state", (e) => setView(JSON.parse((e as MessageEvent).data) as Deployment));
    source.addEventListener("end", (e) => {
      // The server closes the stream after `end`: close first so EventSource does not reconnect.
      source.close();
      setView(JSON.parse((e as MessageEvent).data) as Deployment);
      setState("ended");
    });
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) setState("lost");
    };
    return () => source.close();
  }, [url, follow]);
  return { text, steps, view, state };
}

function streamNote(state: StreamState, d: Deployment, steps: Step[]): string {
  if (state === "lost") return "connection lost: reload the page";
  const retiring = steps.some((s) => s.status === "running");
  if (state === "ended" || (FINISHED.has(d.status) && !retiring)) return d.status;
  if (FINISHED.has(d.status)) return `${d.status}; retiring the old version…`;
  return d.status === "queued" ? "queued: waiting for its turn…" : "following…";
}

export function DeploymentPage({ appId, deploymentId }: { appId: string; deploymentId: string }) {
  const who = useWho();
  const base = `${appBase(who.tenantId, appId)}/deployments/${encodeURIComponent(deploymentId)}`;
  const dep = useLoad(() => get<Deployment>(base), [base]);
  // Follow what is not over yet: running, or finished with a step still running (retire).
  const [followed, setFollowed] = useState(false);
  const first = dep.data;
  useEffect(() => {
    if (first && (!FINISHED.has(first.status) || (first.steps ?? []).some((s) => s.status === "running")))
      setFollowed(true);
  }, [first]);
  const live = useDeploymentStream(`${base}/log`, followed);
  return (
    <Page title="Deployment">
      <p>
        <a href={`/app/applications/${appId}`}>← The application</a>
      </p>
      <Resource r={dep} what="the deployment">
        {(loaded) => {
          const d = live.view ?? loaded;
          const steps = live.steps ?? loaded.steps ?? [];
          return (
            <>
              <dl class="facts">
                <dt>Status</dt>
                <dd data-testid="deployment-status">
                  <Badge status={d.status} />
                </dd>
                <dt>URL</dt>
                <dd data-testid="deployment-url">
                  <AppUrl url={d.url} none="not served (yet)" />
                </dd>
                <dt>Commit</dt>
                <dd class="mono">
                  {d.commit_sha ?? d.commit_ref ?? "—"} {d.commit_message ?? ""}
                  {d.commit_author ? ` (${d.commit_author})` : ""}
                </dd>
                <dt>Trigger</dt>
                <dd>
                  {d.trigger}
                  {d.triggered_by?.name ? ` by ${d.triggered_by.name}` : ""}
                </dd>
                <dt>Started</dt>
                <dd>
                  <Time iso={d.created_at} />
                </dd>
                <dt>Duration</dt>
                <dd>{duration(d.duration_ms)}</dd>
              </dl>
              {d.error && <ErrorNote message={`${d.failed_step ?? "deployment"}: ${d.error}`} />}
              <h2>Steps</h2>
              {steps.length === 0 ? (
                <p class="hint">
                  {FINISHED.has(d.status) ? "No step was recorded." : "No step has started yet."}
                </p>
              ) : (
                <ol class="steps" data-testid="deployment-steps">
                  {steps.map((s) => (
                    <li key={s.name} data-step={s.name} data-status={s.status}>
                      <details open={s.status === "failed"}>
                        <summary>
                          <span class="mono">{s.name}</span> <Badge status={s.status} />{" "}
                          {s.status === "running" ? "" : duration(s.duration_ms)}
                        </summary>
                        <LogText text={s.log || "(no output)"} />
                      </details>
                    </li>
                  ))}
                </ol>
              )}
              {followed && (
                <section aria-labelledby="live-h">
                  <h2 id="live-h">
                    Live log{" "}
                    <output class="hint" data-testid="live-state">
                      {streamNote(live.state, d, steps)}
                    </output>
                  </h2>
                  <LogBox grows={live.text} testId="live-log">
                    {live.text || "Waiting for the agent…"}
                  </LogBox>
                </section>
              )}
            </>
          );
        }}
      </Resource>
    </Page>
  );
}
