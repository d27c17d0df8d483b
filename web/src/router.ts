// A path router for the pages under /app/: history API, one listener, links that
// stay in the page. The control plane answers every /app/* path with index.html.
import { useEffect, useState } from "preact/hooks";

const listeners = new Set<() => void>();

export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  for (const l of listeners) l();
  if (!replace) window.scrollTo(0, 0);
}

window.addEventListener("popstate", () => {
  for (const l of listeners) l();
});

/** The current location (path and query), re-rendering on navigation. */
export function useLocation(): URL {
  const [, setTick] = useState(0);
  useEffect(() => {
    const l = () => setTick((n) => n + 1);
    listeners.add(l);
    return () => listeners.delete(l);
  }, []);
  return new URL(location.href);
}

/** Clicks on in-app links navigate without a page load (modifier clicks keep their meaning). */
export function onLinkClick(e: MouseEvent): void {
  const a = (e.target as Element).closest("a");
  if (!a || a.target || e.defaultPrevented || e.button !== 0) return;
  if (e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const href = a.getAttribute("href");
  if (!href?.startsWith("/app/")) return;
  e.preventDefault();
  navigate(href);
}
