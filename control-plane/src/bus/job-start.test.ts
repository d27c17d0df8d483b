// A job's start on the bus (job-start.ts): a start that carries its request's count travels
// under a header of its own, which a gateway that reads only the plain start header does not
// find (it refuses the job, and the api commits the start with its count itself); a count is
// read only under that header, and only one that names the start's key.
import test from "ava";
import { buildOperation } from "../operations/store.js";
import { type JobStart, startOf, withStart } from "./job-start.js";

const serverId = "0b7c9a38-2d5e-4b8e-9a52-0d1f3e5a7c11";

function start(count?: JobStart["count"]): JobStart {
  const s = buildOperation({
    tenantId: "t-1",
    serverId,
    operationType: "exec",
    keyId: "key-1",
    runId: null,
    leaseMs: 60_000,
    deadlineAt: Date.now() + 60_000,
    audit: { command: "true" },
  });
  return count ? { ...s, count } : s;
}

const count = {
  key_id: "key-1",
  window_seconds: 60,
  window_start: 1_700_000_040_000,
  digest: "d41d8cd98f00b204",
};

test("job start - a counted start reads back whole, under its own header only", (t) => {
  const s = start(count);
  const h = withStart(undefined, s);
  t.is(h.get("Rc-Job-Start"), "", "a gateway reading only the plain header finds no start");
  t.deepEqual(startOf(h, serverId, s.row.id)?.count, count);
  t.deepEqual(startOf(h, serverId, s.row.id)?.row, s.row);
});

test("job start - a start without a count stays under the plain header", (t) => {
  const s = start();
  const h = withStart(undefined, s);
  t.is(h.get("Rc-Job-Start-Counted"), "");
  const read = startOf(h, serverId, s.row.id);
  t.deepEqual(read?.row, s.row);
  t.is(read?.count, undefined);
});

test("job start - a count under the plain header, or one of another key, is no start", (t) => {
  const s = start(count);
  const plain = withStart(undefined, { ...s, count: undefined });
  plain.set("Rc-Job-Start", JSON.stringify(s));
  t.is(startOf(plain, serverId, s.row.id), undefined, "a count outside its header");
  const otherKey = withStart(undefined, start({ ...count, key_id: "key-2" }));
  t.is(startOf(otherKey, serverId, JSON.parse(otherKey.get("Rc-Job-Start-Counted")).row.id), undefined);
  const noDigest = start({ ...count, digest: 5 as unknown as string });
  t.is(startOf(withStart(undefined, noDigest), serverId, noDigest.row.id), undefined);
});
