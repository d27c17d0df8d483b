import test from "ava";
import { resultHash } from "./result-hash.js";

const result = { status: "completed", exit_code: 0, stdout: "out\n", stderr: "", duration_ms: 12 };

test("result hash - changes with every field, and names its algorithm", (t) => {
  const h = resultHash(result);
  t.regex(h, /^sha256:[0-9a-f]{64}$/);
  for (const changed of [
    { status: "failed" },
    { exit_code: 1 },
    { stdout: "out" },
    { stderr: "x" },
    { duration_ms: 13 },
  ])
    t.not(resultHash({ ...result, ...changed }), h, JSON.stringify(changed));
});

test("result hash - a lone surrogate hashes as the U+FFFD the database stores", (t) => {
  t.is(resultHash({ ...result, stdout: "a\ud800" }), resultHash({ ...result, stdout: "a\ufffd" }));
});
