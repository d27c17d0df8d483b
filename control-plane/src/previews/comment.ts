// The words of a preview's one comment on its pull or merge request, written
// by every forge (github/pull-request.ts, forges/comments.ts) so the text has
// one owner: the preview's URL and commit while it runs, then that it was
// removed. GitLab says "merge request" where the others say "pull request".
// The comment's id is kept on the preview's row (preview_comment_id).

const title = (appName: string) => `**relayctl preview of ${appName}**`;

/** Where the preview's deployment stands: a fixed sentence (never its output) and the deployment's page. */
export interface CommentState {
  description: string;
  link?: string;
}

/** The comment while the preview runs: its URL, the commit deployed and, when known, how that went. */
export function previewCommentBody(
  appName: string,
  url: string | null,
  sha: string,
  request = "pull request",
  state?: CommentState,
): string {
  return [
    title(appName),
    "",
    url ? `Preview: ${url}` : "This preview has no URL yet (no domain pattern and no RELAYCTL_APPS_URL).",
    `Commit: ${sha}`,
    ...(state ? [`Deployment: ${state.description}${state.link ? ` (${state.link})` : ""}`] : []),
    "",
    `_This comment is kept up to date on every push; the preview is removed when the ${request} closes._`,
  ].join("\n");
}

/** The same comment once the request closed and its preview was removed. */
export function removedCommentBody(appName: string, merged: boolean, request = "pull request"): string {
  return [title(appName), "", `Removed: the ${request} was ${merged ? "merged" : "closed"}.`].join("\n");
}
