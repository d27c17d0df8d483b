import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { cleanupAll, makeTempDir } from "../../test/harness/cleanup";
import { removeFileDurable, writeFileAtomic } from "./atomic-file.js";

test.after.always(cleanupAll);

test("atomic file - replaces the whole content and leaves no temp file", async (t) => {
  const dir = makeTempDir("atomic");
  const file = join(dir, "routes.json");
  writeFileSync(file, "x".repeat(10_000));
  await writeFileAtomic(file, "short\n");
  t.is(readFileSync(file, "utf8"), "short\n", "no tail of the longer old content");
  t.deepEqual(readdirSync(dir), ["routes.json"]);
});

test("atomic file - the file gets exactly the mode asked for, whatever the umask and the old mode", async (t) => {
  const dir = makeTempDir("atomic");
  const file = join(dir, "agent.json");
  writeFileSync(file, "old", { mode: 0o644 });
  const before = process.umask(0o077);
  try {
    await writeFileAtomic(file, "secret", 0o600);
    t.is(statSync(file).mode & 0o777, 0o600);
    await writeFileAtomic(file, "public");
    t.is(statSync(file).mode & 0o777, 0o644, "the umask does not strip the default mode");
  } finally {
    process.umask(before);
  }
  t.is(readFileSync(file, "utf8"), "public");
});

test("atomic file - a failed write leaves the old file and no temp file", async (t) => {
  const dir = makeTempDir("atomic");
  const file = join(dir, "routes.json");
  writeFileSync(file, "old");
  // A directory where the file should be: the rename fails after the temp file was written.
  const blocked = join(dir, "blocked");
  mkdirSync(join(blocked, "inner"), { recursive: true });
  const err = await t.throwsAsync(writeFileAtomic(blocked, "new"));
  t.regex(err.message, /EISDIR|ENOTEMPTY|EEXIST/);
  t.deepEqual(readdirSync(dir).sort(), ["blocked", "routes.json"]);
  t.is(readFileSync(file, "utf8"), "old");
});

test("atomic file - removing a missing file is not an error; removing a file removes it", async (t) => {
  const dir = makeTempDir("atomic");
  const file = join(dir, "a.conf");
  await removeFileDurable(file);
  writeFileSync(file, "x");
  await removeFileDurable(file);
  t.deepEqual(readdirSync(dir), []);
});
