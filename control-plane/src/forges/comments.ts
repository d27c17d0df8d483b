// A preview's one comment on its GitLab merge request or Gitea/Forgejo pull
// request, as GitHub's (github/pull-request.ts) and in the same words
// (previews/comment.ts): written after each of the preview's deployments starts,
// edited in place later (its id kept on the preview's row, preview_comment_id):
// with the deployment's final state when the status pass reports it
// (statuses.ts, the same fixed sentences as the commit status, and only while
// that commit is still the preview's head), and on close to say the preview
// was removed. The delivery processor and the status pass take turns in one
// loop (processor.ts), so a removal is not overwritten by that process's pass.
// A write that fails is
// tried again a few times, then logged (the forge's answer, never the token);
// it never fails the deployment or the delivery.
import { setTimeout as sleep } from "node:timers/promises";
import { urlsOf } from "../applications/hosts.js";
import { type CommentState, previewCommentBody, removedCommentBody } from "../previews/comment.js";
import type { PreviewRow } from "../previews/store.js";
import { apiToken, type ConnectionRow } from "./connections.js";
import type { ForgeContext } from "./context.js";
import { upsertComment } from "./forge-api.js";

/** Back-off before the 2nd and 3rd tries: a forge's bad moment, not an outage. */
const RETRY_DELAYS_MS = [250, 1_000];

/** What the request is called on this forge, in the comment's words. */
const requestWord = (c: ConnectionRow) => (c.kind === "gitlab" ? "merge request" : "pull request");

/** Writes (or edits) the comment; its id, or null when the forge could not be told. */
async function write(
  ctx: ForgeContext,
  c: ConnectionRow,
  project: string,
  number: number,
  commentId: number | null,
  body: string,
): Promise<number | null> {
  if (!ctx.masterKey) return null;
  const token = apiToken(ctx.masterKey, c);
  for (let attempt = 0; ; attempt++) {
    try {
      return await upsertComment(c.kind, c.base_url, token, project, number, commentId, body);
    } catch (err) {
      const last = attempt >= RETRY_DELAYS_MS.length;
      ctx.log.warn(
        { err: (err as Error).message, forge: c.kind, project, request: number, attempt: attempt + 1 },
        last ? "preview comment not written; given up" : "preview comment not written; retried",
      );
      if (last) return null;
      await sleep(RETRY_DELAYS_MS[attempt]);
    }
  }
}

/**
 * A preview's URL, commit and deployment state, in the one comment: when its
 * deployment starts and when it ends. Nothing once the preview is gone or
 * another commit is its head (that commit's comment is the one to show).
 */
export async function commentPreview(
  ctx: ForgeContext,
  c: ConnectionRow,
  project: string,
  number: number,
  previewId: string,
  appName: string,
  sha: string,
  state: CommentState,
): Promise<void> {
  const row = await ctx.db("applications").where({ id: previewId }).first<PreviewRow | undefined>();
  if (!row || (row.preview_head_sha && row.preview_head_sha !== sha)) return;
  const { url } = await urlsOf(ctx.db, ctx.appsUrl, row);
  const known = row.preview_comment_id === null ? null : Number(row.preview_comment_id);
  const id = await write(
    ctx,
    c,
    project,
    number,
    known,
    previewCommentBody(appName, url, sha, requestWord(c), state),
  );
  if (id !== null && id !== known)
    await ctx.db("applications").where({ id: row.id }).update({ preview_comment_id: id });
}

/** On close: the comment (if one was written) now says the preview was removed. */
export async function commentRemoved(
  ctx: ForgeContext,
  c: ConnectionRow,
  project: string,
  number: number,
  commentId: number,
  appName: string,
  merged: boolean,
): Promise<void> {
  await write(ctx, c, project, number, commentId, removedCommentBody(appName, merged, requestWord(c)));
}
