// The dashboard's page paths: the one list of them. The router (main.tsx) maps each to its
// page, and build.mjs writes it into dist/manifest.json, from which the control plane
// answers any other /app/ path 404 (with the same index.html, which shows "not found").
// A new page is a line here and its line in main.tsx's PAGES (tsc holds the two together).
// Plain data only: build.mjs imports this file with Node's type stripping.

export const PAGE_PATHS = [
  "/app/servers",
  "/app/servers/:id",
  "/app/applications",
  "/app/applications/:id",
  "/app/applications/:id/deployments/:deploymentId",
  "/app/applications/:id/rollouts/:rolloutId",
  "/app/keys",
  "/app/keys/automation",
  "/app/registry",
  "/app/activity",
  "/app/audit",
  "/app/members",
  "/app/account",
  "/app/github",
  "/app/forges",
] as const;

export type PagePath = (typeof PAGE_PATHS)[number];

/** `/app/` itself shows this page. */
export const HOME: PagePath = "/app/servers";

export interface PageMatch {
  path: PagePath;
  params: Record<string, string>;
}

/** The page a path shows (a trailing slash ignored), with its :params decoded; undefined when none. */
export function matchPage(pathname: string): PageMatch | undefined {
  const parts = pathname.replace(/\/+$/, "").split("/");
  if (parts.join("/") === "/app") return { path: HOME, params: {} };
  for (const path of PAGE_PATHS) {
    const pattern = path.split("/");
    if (pattern.length !== parts.length) continue;
    const params: Record<string, string> = {};
    const same = pattern.every((seg, i) => {
      if (!seg.startsWith(":")) return seg === parts[i];
      if (!parts[i]) return false;
      try {
        params[seg.slice(1)] = decodeURIComponent(parts[i]);
        return true;
      } catch {
        return false;
      }
    });
    if (same) return { path, params };
  }
  return undefined;
}
