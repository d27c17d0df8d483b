import test from "ava";
import { isStoreUnavailable } from "./unavailable.js";

test("store - connection-level driver errors are 'unavailable', SQL errors are not", (t) => {
  t.true(isStoreUnavailable(Object.assign(new Error("refused"), { code: "ECONNREFUSED" })));
  t.true(isStoreUnavailable(Object.assign(new Error("t"), { name: "KnexTimeoutError" })));
  t.true(
    isStoreUnavailable(
      new Error("wrapped", { cause: Object.assign(new Error("x"), { code: "PROTOCOL_CONNECTION_LOST" }) }),
    ),
  );
  t.false(isStoreUnavailable(Object.assign(new Error("dup"), { code: "ER_DUP_ENTRY" })));
  t.false(isStoreUnavailable(new Error("plain")));
});
