import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { type BuiltEntry, ImageLedger } from "./image-ledger.js";

const A = "0b9f7a2e-1c3d-4e5f-8a9b-0c1d2e3f4a5b";
const B = "1c0f7a2e-1c3d-4e5f-8a9b-0c1d2e3f4a5b";
const id = (c: string) => `sha256:${c.repeat(64)}`;
const entry = (over: Partial<BuiltEntry>): BuiltEntry => ({
  applicationId: A,
  buildKey: "k1",
  tag: `relayctl/${A}:aaaa-k1`,
  imageId: id("a"),
  deploymentId: "d1",
  builtAtMs: 1,
  usedAtMs: 1,
  ...over,
});
const fileIn = () => join(mkdtempSync(join(tmpdir(), "ledger-")), "images.json");

test("image ledger - what was built survives a reopen; one entry per key and per tag", async (t) => {
  const file = fileIn();
  const l = await ImageLedger.open(file);
  t.is(l.built(A, "k1"), undefined, "no file: empty");
  void l.record(entry({}));
  void l.record(
    entry({ buildKey: "k2", tag: `relayctl/${A}:bbbb-k2`, imageId: id("b"), deploymentId: "d2" }),
  );
  void l.record(entry({ applicationId: B, tag: `relayctl/${B}:aaaa-k1` }));
  // The same key built again (its image pruned by hand): the new image replaces the old entry.
  void l.record(entry({ imageId: id("c"), deploymentId: "d3" }));
  await l.flushed();
  const again = await ImageLedger.open(file);
  t.is(again.built(A, "k1")?.imageId, id("c"));
  t.is(again.built(A, "k1")?.deploymentId, "d3");
  t.is(again.ofApplication(A).length, 2);
  t.is(again.ofApplication(B).length, 1);
  t.is(
    (
      readFileSync(file)
        .toString()
        .match(/"applicationId"/g) ?? []
    ).length,
    3,
  );

  await again.used(A, id("b"), 50);
  t.is((await ImageLedger.open(file)).built(A, "k2")?.usedAtMs, 50, "a reuse or rollback moves it up");
  await again.forget(A, new Set([id("b")]));
  t.is(again.built(A, "k1"), undefined, "an image no longer present is forgotten");
  t.is(again.built(A, "k2")?.imageId, id("b"));
  await again.forget(A);
  t.deepEqual(again.ofApplication(A), []);
  t.is((await ImageLedger.open(file)).ofApplication(B).length, 1, "another application's entries stay");
});

test("image ledger - an unreadable file is an empty ledger, and is replaced whole by the next write", async (t) => {
  const file = fileIn();
  writeFileSync(file, "{ not json");
  const l = await ImageLedger.open(file);
  t.deepEqual(l.ofApplication(A), []);
  await l.record(entry({}));
  t.is((await ImageLedger.open(file)).built(A, "k1")?.tag, `relayctl/${A}:aaaa-k1`);
});
