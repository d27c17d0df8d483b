import test from "ava";
import { hashPassword, passwordProblem, verifyPassword } from "./password.js";

test("password - scrypt hashes verify, carry their parameters and differ by salt", async (t) => {
  const a = await hashPassword("correct horse battery");
  const b = await hashPassword("correct horse battery");
  t.regex(a, /^scrypt\$32768\$8\$1\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);
  t.not(a, b);
  t.true(await verifyPassword("correct horse battery", a));
  t.false(await verifyPassword("correct horse batterY", a));
  t.false(await verifyPassword("correct horse battery", "sha256$nope"));
});

test("password - new passwords need 12 characters", (t) => {
  t.truthy(passwordProblem("short"));
  t.is(passwordProblem("twelve chars"), null);
});
