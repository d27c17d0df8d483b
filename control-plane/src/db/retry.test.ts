import test from "ava";
import { isRetryableLockError } from "./retry.js";

test("retry - a deadlock or lock wait timeout, also as a cause, is retryable; other errors are not", (t) => {
  t.true(isRetryableLockError(Object.assign(new Error("Deadlock found"), { code: "ER_LOCK_DEADLOCK" })));
  t.true(isRetryableLockError(new Error("wrapped", { cause: { code: "ER_LOCK_WAIT_TIMEOUT" } })));
  t.false(isRetryableLockError(Object.assign(new Error("dup"), { code: "ER_DUP_ENTRY" })));
  t.false(isRetryableLockError(new Error("plain")));
});
