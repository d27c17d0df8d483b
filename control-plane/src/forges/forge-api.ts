// The forges' commit-status APIs, called with the connection's sealed token:
// GitLab  POST {base}/api/v4/projects/{id or url-encoded path}/statuses/{sha}
//         (PRIVATE-TOKEN; state pending|running|success|failed|canceled; name)
// Gitea   POST {base}/api/v1/repos/{owner}/{repo}/statuses/{sha}
//         (Authorization: token; state pending|success|failure|error; context)
// Forgejo speaks Gitea's API. The token never appears in an error or a log.
import type { ForgeKind } from "./connections.js";

export interface StatusPost {
  state: string;
  context: string;
  description: string;
  target_url?: string;
}

const TIMEOUT_MS = 10_000;

/** The status URL of a project's commit. */
export function statusUrl(kind: ForgeKind, baseUrl: string, project: string, sha: string): string {
  if (kind === "gitlab") return `${baseUrl}/api/v4/projects/${encodeURIComponent(project)}/statuses/${sha}`;
  const [owner, ...rest] = project.split("/");
  return `${baseUrl}/api/v1/repos/${encodeURIComponent(owner ?? "")}/${encodeURIComponent(rest.join("/"))}/statuses/${sha}`;
}

export async function postStatus(
  kind: ForgeKind,
  baseUrl: string,
  token: string,
  project: string,
  sha: string,
  s: StatusPost,
): Promise<void> {
  const gitlab = kind === "gitlab";
  const body = gitlab
    ? { state: s.state, name: s.context, description: s.description, target_url: s.target_url }
    : { state: s.state, context: s.context, description: s.description, target_url: s.target_url };
  const res = await fetch(statusUrl(kind, baseUrl, project, sha), {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(gitlab ? { "private-token": token } : { authorization: `token ${token}` }),
    },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  await res.body?.cancel().catch(() => undefined);
  if (!res.ok) throw new Error(`${kind} answered ${res.status} to a commit status`);
}

/** GitLab's project by numeric id: its path and clone URL (GET /api/v4/projects/{id}). */
export async function gitlabProject(
  baseUrl: string,
  token: string,
  id: string,
): Promise<{ path: string; cloneUrl: string } | undefined> {
  const res = await fetch(`${baseUrl}/api/v4/projects/${encodeURIComponent(id)}`, {
    headers: { "private-token": token },
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  if (!res.ok) {
    await res.body?.cancel().catch(() => undefined);
    return undefined;
  }
  const p = (await res.json()) as { path_with_namespace?: unknown; http_url_to_repo?: unknown };
  if (typeof p.path_with_namespace !== "string") return undefined;
  return {
    path: p.path_with_namespace,
    cloneUrl:
      typeof p.http_url_to_repo === "string" ? p.http_url_to_repo : `${baseUrl}/${p.path_with_namespace}.git`,
  };
}
