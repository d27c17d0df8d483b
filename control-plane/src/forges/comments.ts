// A preview's one comment on its GitLab merge request or Gitea/Forgejo pull
// request, as GitHub's (github/pull-request.ts) and in the same words
// (previews/comment.ts): written after each of the preview's deployments starts,
// edited in place later (its id kept on the preview's row, preview_comment_id),
// and on close edited to say the preview was removed. A write that fails is
// tried again a few times, then logged (the forge's answer, never the token);
// it never fails the deployment or the delivery.
import { setTimeout as sleep } from "node:timers/promises";
import type { AppsUrl } from "../applications/app-url.js";
import { urlsOf } from "../applications/hosts.js";
import { previewCommentBody, removedCommentBody } from "../previews/comment.js";
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

/** After a preview's deployment started: its URL and commit, in the one comment. */
export async function commentPreview(
  ctx: ForgeContext,
  appsUrl: AppsUrl | undefined,
  c: ConnectionRow,
  project: string,
  number: number,
  previewId: string,
  appName: string,
  sha: string,
): Promise<void> {
  const row = await ctx.db("applications").where({ id: previewId }).first<PreviewRow | undefined>();
  if (!row) return;
  const { url } = await urlsOf(ctx.db, appsUrl, row);
  const known = row.preview_comment_id === null ? null : Number(row.preview_comment_id);
  const id = await write(
    ctx,
    c,
    project,
    number,
    known,
    previewCommentBody(appName, url, sha, requestWord(c)),
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
