// One deployment: its status, commit and steps, and while it runs the live log,
// followed over the deployment log's server-sent events (EventSource sends the
// session cookie) until the `end` event.
import { useEffect, useState } from "preact/hooks";
import { type Deployment, get } from "../api";
import { useWho } from "../session";
import { AppUrl, Badge, ErrorNote, Page, Resource, Time, duration, useLoad, LogText } from "../ui";
import { appBase } from "./application";

interface Progress {
  seq: number;
  step: string;
  status: string;
  log: string;
}

const FINISHED = new Set(["completed", "failed", "timeout"]);

function useLiveLog(url: string, follow: boolean, onEnd: () => void) {
  const [lines, setLines] = useState<Progress[]>([]);
  const [state, setState] = useState<"idle" | "live" | "ended" | "lost">("idle");
  // One stream per deployment: a new onEnd each render must not reopen it.
  // biome-ignore lint/correctness/useExhaustiveDependencies: onEnd is read when the stream ends
  useEffect(() => {
    if (!follow) return;
    const source = new EventSource(url);
    setState("live");
    source.addEventListener("progress", (e) => {
      const p = JSON.parse((e as MessageEvent).data) as Progress;
      setLines((all) => (all.some((x) => x.seq === p.seq) ? all : [...all, p]));
    });
    source.addEventListener("end", () => {
      // The server closes the stream after `end`: close first so EventSource does not reconnect.
      source.close();
      setState("ended");
      onEnd();
    });
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) setState("lost");
    };
    return () => source.close();
  }, [url, follow]);
  return { lines, state };
}

export function DeploymentPage({ appId, deploymentId }: { appId: string; deploymentId: string }) {
  const who = useWho();
  const base = `${appBase(who.tenantId, appId)}/deployments/${encodeURIComponent(deploymentId)}`;
  const dep = useLoad(() => get<Deployment>(base), [base]);
  const running = dep.data !== undefined && !FINISHED.has(dep.data.status);
  const [followed, setFollowed] = useState(false);
  useEffect(() => {
    if (running) setFollowed(true);
  }, [running]);
  const live = useLiveLog(`${base}/log`, followed, dep.reload);
  return (
    <Page title="Deployment">
      <p>
        <a href={`/app/applications/${appId}`}>← The application</a>
      </p>
      <Resource r={dep} what="the deployment">
        {(d) => (
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
            {(d.steps ?? []).length === 0 ? (
              <p class="hint">No step has started yet.</p>
            ) : (
              <ol class="steps">
                {(d.steps ?? []).map((s) => (
                  <li key={s.name}>
                    <details open={s.status === "failed"}>
                      <summary>
                        <span class="mono">{s.name}</span> <Badge status={s.status} />{" "}
                        {duration(s.duration_ms)}
                      </summary>
                      <LogText text={s.log || "(no output)"} />
                    </details>
                  </li>
                ))}
              </ol>
            )}
          </>
        )}
      </Resource>
      {followed && (
        <section aria-labelledby="live-h">
          <h2 id="live-h">
            Live log{" "}
            <output class="hint">
              {live.state === "live"
                ? "following…"
                : live.state === "ended"
                  ? "finished"
                  : live.state === "lost"
                    ? "connection lost"
                    : ""}
            </output>
          </h2>
          <LogText
            live
            text={
              live.lines.map((l) => (l.log.endsWith("\n") || !l.log ? l.log : `${l.log}\n`)).join("") ||
              "Waiting for the agent…"
            }
          />
        </section>
      )}
    </Page>
  );
}
