import { createHmac } from "node:crypto";
import test from "ava";
import { type ChainedFields, canonicalJson, eventHash } from "./audit-log.js";

test("audit - canonical JSON sorts keys at every level", (t) => {
  t.is(
    canonicalJson({ b: 1, a: { d: [2, { z: 1, y: 2 }], c: null } }),
    '{"a":{"c":null,"d":[2,{"y":2,"z":1}]},"b":1}',
  );
});

test("audit - hash chains to the previous event and changes with any field", (t) => {
  const fields: ChainedFields = {
    seq: 1,
    event_type: "operation.exec",
    operation_id: "o",
    key_id: "k",
    server_id: "s",
    run_id: "r",
    payload: canonicalJson({ command: "true" }),
    created_at: 1,
  };
  const h1 = eventHash(null, fields);
  t.regex(h1, /^[0-9a-f]{64}$/);
  t.not(eventHash("00", fields), h1);
  t.not(eventHash(null, { ...fields, payload: canonicalJson({ command: "false" }) }), h1);
  t.is(eventHash(null, { ...fields }), h1);
});

test("audit - a keyed hash is an HMAC: it differs from the plain hash and between keys", (t) => {
  const fields: ChainedFields = {
    seq: 2,
    event_type: "operation.completed",
    operation_id: "o",
    key_id: null,
    server_id: "s",
    run_id: null,
    payload: canonicalJson({ result_hash: "sha256:00" }),
    created_at: 2,
  };
  const plain = eventHash("prev", fields);
  const keyed = eventHash("prev", fields, Buffer.alloc(32, 1));
  t.regex(keyed, /^[0-9a-f]{64}$/);
  t.not(keyed, plain);
  t.not(eventHash("prev", fields, Buffer.alloc(32, 2)), keyed);
  t.is(eventHash("prev", { ...fields }, Buffer.alloc(32, 1)), keyed);
  // The same HMAC as with the raw key (the chain keeps its hashes; eventHash uses a KeyObject),
  // also for a second key of the same bytes and after the first key's object is made.
  const raw = (key: Buffer) =>
    createHmac("sha256", key)
      .update(`prev\n${canonicalJson(fields)}`)
      .digest("hex");
  t.is(keyed, raw(Buffer.alloc(32, 1)));
  t.is(eventHash("prev", fields, Buffer.alloc(32, 2)), raw(Buffer.alloc(32, 2)));
});
