import { mkdtemp, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { Journal } from "./journal.js";

test("journal - group commit: concurrent claims and done records all reach the disk, whole and in call order", async (t) => {
  const path = join(await mkdtemp(join(tmpdir(), "journal-")), "journal.log");
  const journal = await Journal.open(path);
  const ids = Array.from({ length: 300 }, (_, i) => `op-${i}`);
  // Claims taken all at once: each resolves only once its record is written and fsynced.
  const claims = ids.map((id) => journal.start(id));
  t.true(
    ids.every((id) => journal.has(id)),
    "has() turns true at the call, before the write",
  );
  await Promise.all(claims);
  const afterClaims = await readFile(path, "utf8");
  t.deepEqual(
    afterClaims.split("\n").filter(Boolean),
    ids.map((id) => `start ${id}`),
    "every claim is on disk once its promise resolved, in order",
  );
  await Promise.all(ids.filter((_, i) => i % 2 === 0).map((id) => journal.done(id)));
  await journal.close();

  const reopened = await Journal.open(path);
  t.true(ids.every((id) => reopened.has(id)));
  t.deepEqual(
    reopened.unfinished(),
    ids.filter((_, i) => i % 2 === 1),
  );
  await reopened.close();
});

test("journal - claimed() waits for a claim being written and resolves at once for others", async (t) => {
  const path = join(await mkdtemp(join(tmpdir(), "journal-")), "journal.log");
  const journal = await Journal.open(path);
  const claim = journal.start("op-a");
  let durable = false;
  void claim.then(() => {
    durable = true;
  });
  await journal.claimed("op-a");
  t.true(durable, "claimed() resolved only after the claim's write");
  t.true((await readFile(path, "utf8")).includes("start op-a\n"));
  await journal.claimed("op-unknown");
  await journal.close();
});
