// What the Servers list and a server's page share: its connected state as a badge
// that turns grey "unknown" while the control plane does not answer the page's
// polls (issue 31, defect 7: a stale "connected" must not stay green), and the
// banner that says since when.
import { useRef } from "preact/hooks";
import { Time, type Loaded, when } from "../ui";
import "./servers.css";

/**
 * When the page's polls started failing (ISO), while they fail and something was
 * shown before; undefined while they succeed. The data shown is then as of the
 * last answer, so every live state on it is unknown.
 */
export function useUnreachableSince(r: Loaded<unknown>): string | undefined {
  const since = useRef<string | undefined>(undefined);
  if (r.error !== undefined && r.data !== undefined) since.current ??= new Date().toISOString();
  else if (r.error === undefined) since.current = undefined;
  return since.current;
}

export function UnreachableBanner({ since, error }: { since: string | undefined; error?: string }) {
  if (!since) return null;
  // A network failure's own words say the same as the banner; anything else (a 502 of a proxy) is told.
  const other = error && !/cannot be reached/i.test(error) ? ` Its last answer: ${error}` : "";
  return (
    <p class="error unreachable" role="alert">
      Cannot reach the control plane since <time dateTime={since}>{when(since)}</time> (
      <Time iso={since} />
      ).{other} Connection states are unknown until it answers again; the rest is as of then.
    </p>
  );
}

/** connected (green), not connected (grey), or unknown (grey, outlined) while the control plane is unreachable. */
export function ConnectedBadge({ connected, unknown }: { connected: boolean | undefined; unknown: boolean }) {
  if (unknown) return <span class="badge badge-unknown">unknown</span>;
  return (
    <span class={`badge ${connected ? "badge-completed" : "badge-off"}`}>
      {connected ? "connected" : "not connected"}
    </span>
  );
}
