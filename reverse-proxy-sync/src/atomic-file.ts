// The one durable whole-file replacement of relayctl: a temp file in the same directory,
// fsync, rename over the target, fsync of the directory. A crash leaves the old file or
// the new one, never half of one, and the rename itself survives a power loss. Used by
// the route writers and the ledger here, and by the agent (agent.json, spooled results),
// which already depends on this package.
import { randomBytes } from "node:crypto";
import { open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

/** fsync a directory so a rename or unlink in it survives a crash. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Replaces file with content atomically, with exactly `mode` (the umask does not apply:
 * a credential file must be 0600 whatever the caller's umask). The temp name starts with
 * a dot and ends in `.tmp`, so globs the proxies load (`*.conf`, `*.yml`) and readers of
 * `*.json` never pick it up, and a cleaner can spot a write that never reached its rename.
 */
export async function writeFileAtomic(file: string, content: string, mode = 0o644): Promise<void> {
  const dir = dirname(file);
  const tmp = join(dir, `.${basename(file)}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`);
  const fh = await open(tmp, "wx", mode);
  try {
    await fh.chmod(mode);
    await fh.writeFile(content, "utf8");
    await fh.sync();
  } catch (err) {
    await fh.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  await fh.close();
  try {
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  await fsyncDir(dir);
}

/** Removes file if it exists, durably (the unlink is fsynced through its directory). */
export async function removeFileDurable(file: string): Promise<void> {
  try {
    await unlink(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  await fsyncDir(dirname(file));
}
