import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { cleanupAll, makeTempDir } from "../../test/harness/cleanup";
import { type LedgerEntry, RouteLedger } from "./ledger.js";

test.after.always(cleanupAll);

const entry = (applicationId: string, over: Partial<LedgerEntry> = {}): LedgerEntry => ({
  applicationId,
  signatureHash: `sha256:${"a".repeat(64)}`,
  fqdns: ["a.example.test"],
  upstream: "127.0.0.1:3000",
  containerName: "shop-1",
  containerPort: 3000,
  imageTag: "shop:7",
  appliedAt: 1_700_000_000_000,
  ...over,
});

test("ledger - a missing file is an empty ledger, and nothing is written until save", async (t) => {
  const file = join(makeTempDir("ledger"), "state", "routes.json");
  const ledger = await RouteLedger.open(file);
  t.deepEqual(ledger.ids(), []);
  t.is(ledger.get("x"), undefined);
  t.false(existsSync(file));
});

test("ledger - set, delete and save survive a reopen; the file is private to its owner", async (t) => {
  const dir = makeTempDir("ledger");
  const file = join(dir, "state", "routes.json");
  const ledger = await RouteLedger.open(file);
  ledger.set(entry("b"));
  ledger.set(entry("a", { imageTag: "shop:8" }));
  ledger.set(entry("c"));
  ledger.delete("c");
  await ledger.save();
  t.is(statSync(file).mode & 0o777, 0o600);
  t.deepEqual(readdirSync(join(dir, "state")), ["routes.json"], "no temp file left behind");
  const again = await RouteLedger.open(file);
  t.deepEqual(again.ids(), ["a", "b"]);
  t.deepEqual(again.get("a"), entry("a", { imageTag: "shop:8" }));
});

test("ledger - entries are copies: changing one handed out does not change the ledger", async (t) => {
  const ledger = await RouteLedger.open(join(makeTempDir("ledger"), "routes.json"));
  const e = entry("a");
  ledger.set(e);
  e.fqdns.push("b.example.test");
  ledger.get("a")!.fqdns.push("c.example.test");
  t.deepEqual(ledger.get("a")?.fqdns, ["a.example.test"]);
});

test("ledger - a corrupt file is kept aside (never overwriting an earlier one) and the ledger starts empty", async (t) => {
  const dir = makeTempDir("ledger");
  const file = join(dir, "routes.json");
  for (const [i, text] of ['{"version":1,"routes":[{"applicationId":3}]}', "{not json", "[]"].entries()) {
    writeFileSync(file, text);
    const ledger = await RouteLedger.open(file);
    t.deepEqual(ledger.ids(), [], text);
    t.false(existsSync(file), text);
    const aside = readdirSync(dir).filter((f) => f.startsWith("routes.json.corrupt-"));
    t.is(aside.length, i + 1, text);
    t.true(
      aside.some((f) => readFileSync(join(dir, f), "utf8") === text),
      text,
    );
  }
});
