import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { insideRepo, realInsideRepo } from "./repo-paths.js";

test("deploy paths - names that climb out of the repository or are absolute are refused", (t) => {
  const root = "/tmp/repo";
  t.is(insideRepo(root, "."), root);
  t.is(insideRepo(root, "Dockerfile"), "/tmp/repo/Dockerfile");
  t.is(insideRepo(root, "docker/../Dockerfile"), "/tmp/repo/Dockerfile");
  t.is(insideRepo(root, "..dir/Dockerfile"), "/tmp/repo/..dir/Dockerfile");
  for (const bad of ["..", "../x", "a/../../x", "/etc/passwd", "x\u0000y"]) {
    t.is(insideRepo(root, bad), undefined, bad);
  }
});

test("deploy paths - a symlink out of the repository is refused once on disk", async (t) => {
  const root = mkdtempSync(join(tmpdir(), "relayctl-paths-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, "app"));
  writeFileSync(join(root, "app", "Dockerfile"), "FROM scratch\n");
  symlinkSync("/etc/passwd", join(root, "Evil"));
  symlinkSync("app", join(root, "inner"));
  t.truthy(await realInsideRepo(root, "app/Dockerfile"));
  t.truthy(await realInsideRepo(root, "inner/Dockerfile"), "a link that stays inside is fine");
  t.is(await realInsideRepo(root, "Evil"), undefined);
  t.is(await realInsideRepo(root, "missing"), undefined, "a path that does not exist is refused");
});
