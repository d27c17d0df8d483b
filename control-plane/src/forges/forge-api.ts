// The forges' commit-status APIs, called with the connection's sealed token:
// GitLab  POST {base}/api/v4/projects/{id or url-encoded path}/statuses/{sha}
//         (PRIVATE-TOKEN; state pending|running|success|failed|canceled; name)
// Gitea   POST {base}/api/v1/repos/{owner}/{repo}/statuses/{sha}
//         (Authorization: token; state pending|success|failure|error; context)
// and a preview's one comment on its merge/pull request (comments.ts):
// GitLab  POST {base}/api/v4/projects/{id}/merge_requests/{iid}/notes {body} → {id}
//         PUT  …/merge_requests/{iid}/notes/{note_id} {body}
// Gitea   POST {base}/api/v1/repos/{owner}/{repo}/issues/{index}/comments {body} → {id}
//         PATCH {base}/api/v1/repos/{owner}/{repo}/issues/comments/{id} {body}
// Forgejo speaks Gitea's API. The token never appears in an error or a log.
import type { ForgeKind } from "./connections.js";

export interface StatusPost {
  state: string;
  context: string;
  description: string;
  target_url?: string;
}

const TIMEOUT_MS = 10_000;

/** A project's API root: GitLab's by id or url-encoded path, Gitea's by owner/repo. */
function projectApi(kind: ForgeKind, baseUrl: string, project: string): string {
  if (kind === "gitlab") return `${baseUrl}/api/v4/projects/${encodeURIComponent(project)}`;
  const [owner, ...rest] = project.split("/");
  return `${baseUrl}/api/v1/repos/${encodeURIComponent(owner ?? "")}/${encodeURIComponent(rest.join("/"))}`;
}

/** The status URL of a project's commit. */
export function statusUrl(kind: ForgeKind, baseUrl: string, project: string, sha: string): string {
  return `${projectApi(kind, baseUrl, project)}/statuses/${sha}`;
}

const authHeader = (kind: ForgeKind, token: string): Record<string, string> =>
  kind === "gitlab" ? { "private-token": token } : { authorization: `token ${token}` };

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
      ...authHeader(kind, token),
    },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  await res.body?.cancel().catch(() => undefined);
  if (!res.ok) throw new Error(`${kind} answered ${res.status} to a commit status`);
}

/**
 * Writes a merge/pull request's comment: edits `commentId` in place, or creates
 * one (also when the edit finds it deleted: 404). Returns the comment's id.
 */
export async function upsertComment(
  kind: ForgeKind,
  baseUrl: string,
  token: string,
  project: string,
  number: number,
  commentId: number | null,
  body: string,
): Promise<number> {
  const root = projectApi(kind, baseUrl, project);
  const send = (method: string, url: string) =>
    fetch(url, {
      method,
      headers: { "content-type": "application/json", ...authHeader(kind, token) },
      body: JSON.stringify({ body }),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  if (commentId !== null) {
    const res = await send(
      kind === "gitlab" ? "PUT" : "PATCH",
      kind === "gitlab"
        ? `${root}/merge_requests/${number}/notes/${commentId}`
        : `${root}/issues/comments/${commentId}`,
    );
    await res.body?.cancel().catch(() => undefined);
    if (res.ok) return commentId;
    if (res.status !== 404) throw new Error(`${kind} answered ${res.status} to editing a comment`);
  }
  const res = await send(
    "POST",
    kind === "gitlab" ? `${root}/merge_requests/${number}/notes` : `${root}/issues/${number}/comments`,
  );
  if (!res.ok) {
    await res.body?.cancel().catch(() => undefined);
    throw new Error(`${kind} answered ${res.status} to a new comment`);
  }
  const id = Number(((await res.json()) as { id?: unknown }).id);
  if (!Number.isSafeInteger(id)) throw new Error(`${kind} answered a new comment without its id`);
  return id;
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
