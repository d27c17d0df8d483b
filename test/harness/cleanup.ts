// One place that undoes everything a test file started: processes, temp dirs, connections.
// Each test file calls `test.after.always(cleanupAll)`; as a last resort, @relayctl/devkit
// kills every process it still supervises when the test process exits.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

type Cleanup = () => Promise<void> | void;

const cleanups: Cleanup[] = [];

export function onCleanup(fn: Cleanup): void {
  cleanups.push(fn);
}

/** Runs every registered cleanup, newest first; never throws. */
export async function cleanupAll(): Promise<void> {
  while (cleanups.length > 0) {
    const fn = cleanups.pop()!;
    try {
      await fn();
    } catch (err) {
      console.error("cleanup failed:", err);
    }
  }
}

/** A fresh temp dir, removed at cleanup unless RELAYCTL_TEST_KEEP_TMP is set (for post-mortems). */
export function makeTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `relayctl-test-${prefix}-`));
  onCleanup(() => {
    if (!process.env.RELAYCTL_TEST_KEEP_TMP) rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}
