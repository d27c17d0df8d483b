// Paths the application gives inside its repository (Dockerfile, build
// context) must stay inside it: first by name (no absolute path, no ".."
// climbing out), then on disk once the commit is exported (a symlink in the
// repository must not lead the build to the agent's own files).
import { realpath } from "node:fs/promises";
import { isAbsolute, relative, resolve, sep } from "node:path";

/** The absolute path of `rel` under `root`, or undefined when it would leave root. */
export function insideRepo(root: string, rel: string): string | undefined {
  if (rel.includes("\0") || isAbsolute(rel)) return undefined;
  const full = resolve(root, rel);
  const back = relative(root, full);
  if (back === "") return full;
  if (back === ".." || back.startsWith(`..${sep}`) || isAbsolute(back)) return undefined;
  return full;
}

/** Like insideRepo, and the path with its symlinks resolved must still be inside. */
export async function realInsideRepo(root: string, rel: string): Promise<string | undefined> {
  const byName = insideRepo(root, rel);
  if (byName === undefined) return undefined;
  try {
    const realRoot = await realpath(root);
    const real = await realpath(byName);
    return insideRepo(realRoot, relative(realRoot, real)) === undefined ? undefined : real;
  } catch {
    return undefined;
  }
}
