// An application's container output on its page: while the Logs section is
// open, its live container's log is followed over server-sent events
// (EventSource sends the session cookie): the last 200 lines, then new ones as
// they come, until the server ends the follow (the container stopped, the
// agent went away, the follow's maximum time) or the section is closed, which
// closes the stream and ends the read on the server. stderr lines are marked;
// env values arrive masked (`***`).
import { useEffect, useState } from "preact/hooks";
import { ApiError, get } from "../api";
import { LogBox } from "../ui";

interface Line {
  stream: "stdout" | "stderr";
  text: string;
}

type State =
  | { kind: "connecting" }
  | { kind: "live" }
  | { kind: "ended"; detail: string }
  | { kind: "refused"; detail: string };

/** Lines kept on the page; older ones scroll away. */
const KEEP = 2000;

export function Logs({ appId }: { appId: string }) {
  const [open, setOpen] = useState(false);
  return (
    <details class="card" onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>
        <h2>Logs</h2>
      </summary>
      {open ? <FollowedLog appId={appId} /> : null}
    </details>
  );
}

function FollowedLog({ appId }: { appId: string }) {
  const path = `/api/applications/${encodeURIComponent(appId)}/logs`;
  const [lines, setLines] = useState<Line[]>([]);
  const [state, setState] = useState<State>({ kind: "connecting" });
  useEffect(() => {
    const source = new EventSource(`${path}?follow=true`);
    let opened = false;
    source.onopen = () => {
      opened = true;
      setState({ kind: "live" });
    };
    source.addEventListener("log", (e) => {
      const line = JSON.parse((e as MessageEvent).data) as Line;
      setLines((all) => [...all.slice(-(KEEP - 1)), line]);
    });
    source.addEventListener("end", (e) => {
      // The server closes the stream after `end`: close first so EventSource does not reconnect.
      source.close();
      const end = JSON.parse((e as MessageEvent).data) as { reason: string; detail: string };
      setState({ kind: "ended", detail: end.detail || end.reason });
    });
    source.onerror = () => {
      if (opened && source.readyState !== EventSource.CLOSED) return; // reconnecting on its own
      source.close();
      // Refused before the stream began (409 nothing live, 429 too many follows...): ask why.
      get(`${path}?tail=1`).then(
        () => setState({ kind: "ended", detail: "the stream was lost: close and open Logs again" }),
        (err) => setState({ kind: "refused", detail: err instanceof ApiError ? err.detail : String(err) }),
      );
    };
    return () => source.close();
  }, [path]);
  if (state.kind === "refused") return <p class="error">{state.detail}</p>;
  return (
    <>
      <p class="hint" data-testid="logs-state">
        {state.kind === "connecting"
          ? "Connecting…"
          : state.kind === "live"
            ? "Following the live container's output (stdout, and stderr in red)."
            : `Ended: ${state.detail}`}
      </p>
      <LogBox grows={lines} testId="app-logs">
        {lines.map((l, i) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: lines are only ever appended
          <div key={i} class={l.stream === "stderr" ? "stderr" : undefined}>
            {l.text}
          </div>
        ))}
      </LogBox>
    </>
  );
}
