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
