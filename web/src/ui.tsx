// Pieces every page uses: loading a resource (with a poll), the loading, error and
// empty states, a secret shown once with a copy button, a confirmation dialog,
// a form's submit with its pending and error states, and small formatters.
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "./api";

export interface Loaded<T> {
  data?: T;
  error?: string;
  loading: boolean;
  reload: () => void;
}

/**
 * A filter form's fields, held in the form's own state from the address's values: a field's
 * value must not come from the address on every render, or a render before submit (a list of
 * servers or applications arriving) puts every field back and drops what the person chose
 * (Preact sets a select's or input's value whenever it differs from the DOM). Key the form by
 * the address so a new address starts afresh. Spread `field(name)` on the input or select.
 */
export function useFilterFields(params: Record<string, string>) {
  const [values, setValues] = useState(params);
  return (name: string) => ({
    name,
    value: values[name] ?? "",
    onInput: (e: Event) =>
      setValues((v) => ({ ...v, [name]: (e.currentTarget as HTMLInputElement | HTMLSelectElement).value })),
  });
}

/** The first wait before a load that could not reach the control plane is tried again; it doubles up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

/**
 * Runs load() now, when deps change, on reload() and every pollMs (if given), keeping the last data.
 * A load that could not reach the control plane (no answer at all, ApiError status 0) is tried
 * again after 1 s, 2 s, 4 s... (at most RETRY_MAX_MS, or pollMs when sooner), its error shown
 * meanwhile: without it a one-time load stayed broken until the page was reloaded. A blip
 * never gets here: request() (api.ts) asks a read again twice within 1.25 s first, so this is
 * for the control plane not answering longer. Chromium
 * aborts the requests in flight when a network interface comes or goes (ERR_NETWORK_CHANGED:
 * a VPN, Wi-Fi, a container's veth); a CI run saw the application's Settings keep "cannot be
 * reached" instead of its form because its /api/servers was aborted so (test/dashboard-apps).
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], pollMs?: number): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: string; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  const shown = useRef<string | undefined>(undefined);
  // biome-ignore lint/correctness/useExhaustiveDependencies: deps are the caller's
  useEffect(() => {
    let live = true;
    // Other deps (another filter, another id): the old data must not stand for the new.
    const key = JSON.stringify(deps);
    if (shown.current !== undefined && shown.current !== key) setState({ loading: true });
    shown.current = key;
    let timer: number | undefined;
    let retryMs = RETRY_FIRST_MS;
    const run = async () => {
      let next = pollMs;
      try {
        const data = await load();
        retryMs = RETRY_FIRST_MS;
        if (live) setState({ data, loading: false });
      } catch (err) {
        if (live) setState((s) => ({ data: s.data, error: messageOf(err), loading: false }));
        if (err instanceof ApiError && err.status === 0) {
          next = Math.min(retryMs, pollMs ?? retryMs);
          retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
        }
      }
      if (live && next) timer = window.setTimeout(run, next);
    };
    run();
    return () => {
      live = false;
      window.clearTimeout(timer);
    };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  return { ...state, reload };
}

export function messageOf(err: unknown): string {
  if (err instanceof ApiError) return err.detail;
  return err instanceof Error ? err.message : String(err);
}

export function Loading({ what }: { what: string }) {
  return <output class="loading">Loading {what}…</output>;
}

export function ErrorNote({ message }: { message: string | undefined }) {
  if (!message) return null;
  return (
    <p class="error" role="alert">
      {message}
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

/** The state of a resource: loading the first time, its error, or the content. */
export function Resource<T>({
  r,
  what,
  children,
}: {
  r: Loaded<T>;
  what: string;
  children: (data: T) => ComponentChildren;
}) {
  if (r.data === undefined && r.loading) return <Loading what={what} />;
  return (
    <>
      <ErrorNote message={r.error} />
      {r.data !== undefined && children(r.data)}
    </>
  );
}

/** A secret (or a command holding one) the API shows once: read-only, selectable, with a copy button. */
export function SecretOnce({ label, value, note }: { label: string; value: string; note?: string }) {
  const [copied, setCopied] = useState(false);
  const ref = useRef<HTMLTextAreaElement>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
    } catch {
      ref.current?.select();
      document.execCommand("copy");
    }
    setCopied(true);
  };
  const id = `secret-${label.replace(/\W+/g, "-").toLowerCase()}`;
  return (
    <div class="secret">
      <label for={id}>{label}</label>
      <textarea id={id} ref={ref} readOnly rows={Math.min(4, Math.ceil(value.length / 60))} value={value} />
      <div class="row">
        <button type="button" onClick={copy}>
          {copied ? "Copied" : "Copy"}
        </button>
        <output class="hint">{copied ? `${label} copied to the clipboard.` : ""}</output>
      </div>
      <p class="hint">{note ?? "Shown only this once: copy it now. relayctl keeps only a hash."}</p>
    </div>
  );
}

/** A button that asks first in a modal dialog (Escape or Cancel closes it) and then runs action. */
export function ConfirmButton({
  label,
  title,
  question,
  confirm,
  action,
  danger = true,
}: {
  label: string;
  title?: string;
  question: string;
  confirm: string;
  action: () => Promise<unknown>;
  danger?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
      dialog.current?.close();
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button
        type="button"
        class={danger ? "danger" : ""}
        aria-label={title}
        onClick={() => dialog.current?.showModal()}
      >
        {label}
      </button>
      <dialog ref={dialog} aria-labelledby="confirm-q">
        <p>{question}</p>
        <ErrorNote message={error} />
        <div class="row">
          <button type="button" class={danger ? "danger" : "primary"} disabled={busy} onClick={run}>
            {busy ? "Working…" : confirm}
          </button>
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
        </div>
      </dialog>
    </>
  );
}

/** A form whose submit shows "working" and the API's detail on failure. */
export function Form({
  onSubmit,
  submit,
  children,
  label,
}: {
  onSubmit: (form: HTMLFormElement) => Promise<unknown>;
  submit: string;
  children: ComponentChildren;
  label: string;
}) {
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const handle = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await onSubmit(e.currentTarget as HTMLFormElement);
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={handle} aria-label={label} class="form">
      {children}
      <ErrorNote message={error} />
      <button type="submit" class="primary" disabled={busy}>
        {busy ? "Working…" : submit}
      </button>
    </form>
  );
}

/** The named field's value of a form, trimmed. */
export function field(form: HTMLFormElement, name: string): string {
  const el = form.elements.namedItem(name) as HTMLInputElement | null;
  return (el?.value ?? "").trim();
}

/** The checked values of a group of checkboxes. */
export function checked(form: HTMLFormElement, name: string): string[] {
  return [...form.querySelectorAll<HTMLInputElement>(`input[name="${name}"]:checked`)].map((i) => i.value);
}

/** One entry per line or comma, blanks dropped. */
export function lines(text: string): string[] {
  return text
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The absolute time, in the reader's locale and zone. */
export function when(iso: string | null | undefined): string {
  if (!iso) return "never";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * How far a time is from now in words: "just now", "3 min ago", "in 2 h", "5 days ago".
 * Past a month the date itself says more than a count of days.
 */
export function ago(iso: string, now = Date.now()): string {
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return iso;
  const diff = now - t;
  const abs = Math.abs(diff);
  if (abs < 45_000) return "just now";
  let span: string;
  if (abs < HOUR) span = `${Math.round(abs / MINUTE)} min`;
  else if (abs < DAY) span = `${Math.round(abs / HOUR)} h`;
  else if (abs < 30 * DAY) {
    const days = Math.round(abs / DAY);
    span = `${days} day${days === 1 ? "" : "s"}`;
  } else return new Date(t).toLocaleDateString();
  return diff >= 0 ? `${span} ago` : `in ${span}`;
}

// One clock for every <Time> on the page: a timer per time shown would be hundreds on a long list.
const clockListeners = new Set<() => void>();
let clockTimer: number | undefined;
function useClock(): void {
  const [, setTick] = useState(0);
  useEffect(() => {
    const l = () => setTick((n) => n + 1);
    clockListeners.add(l);
    if (clockTimer === undefined)
      clockTimer = window.setInterval(() => {
        for (const f of clockListeners) f();
      }, 30_000);
    return () => {
      clockListeners.delete(l);
      if (clockListeners.size === 0) {
        window.clearInterval(clockTimer);
        clockTimer = undefined;
      }
    };
  }, []);
}

/** A time as "3 min ago" (kept current), the absolute time on hover and in dateTime. */
export function Time({ iso, none = "never" }: { iso: string | null | undefined; none?: string }) {
  useClock();
  if (!iso) return <span>{none}</span>;
  return (
    <time dateTime={iso} title={when(iso)}>
      {ago(iso)}
    </time>
  );
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export function Badge({ status }: { status: string }) {
  return <span class={`badge badge-${status.replace(/[^a-z_]/g, "")}`}>{status}</span>;
}

export function Page({
  title,
  actions,
  children,
}: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · relayctl`;
  }, [title]);
  return (
    <>
      <div class="page-head">
        <h1 id="page-title" tabIndex={-1}>
          {title}
        </h1>
        {actions && <div class="actions">{actions}</div>}
      </div>
      {children}
    </>
  );
}

/** Command output or a deployment log: may scroll, so it takes focus for keyboard users. */
export function LogText({ text, stderr, live }: { text: string; stderr?: boolean; live?: boolean }) {
  return (
    <pre
      class={stderr ? "log stderr" : "log"}
      // A scrollable region takes focus so keyboard users can scroll it (axe: scrollable-region-focusable).
      tabIndex={0}
      role={live ? "log" : undefined}
      aria-live={live ? "polite" : undefined}
      data-testid={live ? "live-log" : undefined}
    >
      {text}
    </pre>
  );
}

/**
 * A listing's page size that "Show more" grows (up to the API's maximum). It lives in a
 * ref, not in useLoad's deps, so growing it reloads without blanking the list.
 */
export function usePageSize(first: number, max: number) {
  const size = useRef(first);
  return {
    get: () => size.current,
    grow: (reload: () => void) => {
      size.current = Math.min(size.current * 2, max);
      reload();
    },
    atMax: () => size.current >= max,
  };
}

export function ShowMore({ hasMore, onMore, what }: { hasMore: boolean; onMore: () => void; what: string }) {
  if (!hasMore) return null;
  return (
    <p>
      <button type="button" onClick={onMore}>
        Show older {what}
      </button>
    </p>
  );
}

/** An application's URL, opened in a new tab (it is the application's page, not the dashboard's). */
export function AppUrl({ url, none = "—" }: { url: string | null | undefined; none?: string }) {
  if (!url) return <>{none}</>;
  return (
    <a href={url} target="_blank" rel="noopener noreferrer" class="mono">
      {url}
    </a>
  );
}

/**
 * A log box that keeps its end in view as lines come, unless the person has
 * scrolled up to read; scrolling back to the end follows again. `grows` is what
 * changes when lines arrive (the text, or the list of lines).
 */
export function LogBox({
  grows,
  testId,
  children,
}: { grows: unknown; testId: string; children: ComponentChildren }) {
  const pre = useRef<HTMLPreElement>(null);
  const atEnd = useRef(true);
  const onScroll = () => {
    const el = pre.current;
    if (el) atEnd.current = el.scrollHeight - el.scrollTop - el.clientHeight < 8;
  };
  // biome-ignore lint/correctness/useExhaustiveDependencies: scroll when the log grows
  useLayoutEffect(() => {
    const el = pre.current;
    if (el && atEnd.current) el.scrollTop = el.scrollHeight;
  }, [grows]);
  return (
    <pre
      class="log"
      ref={pre}
      onScroll={onScroll}
      // A scrollable region takes focus so keyboard users can scroll it (axe: scrollable-region-focusable).
      // biome-ignore lint/a11y/noNoninteractiveTabindex: as above
      tabIndex={0}
      role="log"
      aria-live="polite"
      data-testid={testId}
    >
      {children}
    </pre>
  );
}
