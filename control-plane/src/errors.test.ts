import { readFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { ERRORS, RcError } from "./errors.js";

const doc = readFileSync(join(__dirname, "../../docs/errors.md"), "utf8");

test("errors - every code is documented with its status", (t) => {
  for (const [code, { status }] of Object.entries(ERRORS)) {
    t.regex(doc, new RegExp(`\\| \`${code}\` \\| ${status} \\|`), `${code} missing from docs/errors.md`);
  }
});

test("errors - body is detail plus extra fields", (t) => {
  const e = new RcError("RC_ERR_SERVER_NOT_CONNECTED", "server 'x' is not connected", {
    extra: { operation_id: "abc" },
  });
  t.is(e.status, 409);
  t.deepEqual(e.body(), { detail: "server 'x' is not connected", operation_id: "abc" });
});
