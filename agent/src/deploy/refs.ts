// How a commit_ref is read: as a branch, then a tag, then a commit SHA (a name
// that is both a branch and a tag is the branch, as the deploy branch is). Pure,
// so the order is tested without git.

/** A ref git would accept as a branch or tag name, or a hex SHA; never an option. */
export function validRef(ref: string): boolean {
  if (ref.length === 0 || ref.length > 255 || ref.startsWith("-") || ref.startsWith("/")) return false;
  if (ref.includes("..") || ref.includes("@{") || ref.endsWith("/") || ref.endsWith(".lock")) return false;
  // Control characters, space and the special characters of git check-ref-format.
  for (const ch of ref) if (ch.charCodeAt(0) <= 0x20 || ch.charCodeAt(0) === 0x7f) return false;
  return !/[~^:?*[\\]/.test(ref);
}

export function isCommitSha(ref: string): boolean {
  return /^[0-9a-f]{7,40}$/i.test(ref);
}

/** What `git log` is asked, in order; the first that names a commit wins. */
export function refCandidates(ref: string): { kind: "branch" | "tag" | "commit"; rev: string }[] {
  const out: { kind: "branch" | "tag" | "commit"; rev: string }[] = [
    { kind: "branch", rev: `refs/heads/${ref}` },
    { kind: "tag", rev: `refs/tags/${ref}` },
  ];
  if (isCommitSha(ref)) out.push({ kind: "commit", rev: ref.toLowerCase() });
  if (/^refs\/(pull|merge-requests)\/\d+\/head$/.test(ref)) out.push({ kind: "commit", rev: ref });
  return out;
}
