import test from "ava";
import { isCommitSha, refCandidates, validRef } from "./refs.js";

test("deploy refs - a ref is tried as a branch, then a tag, then a commit SHA", (t) => {
  t.deepEqual(refCandidates("main"), [
    { kind: "branch", rev: "refs/heads/main" },
    { kind: "tag", rev: "refs/tags/main" },
  ]);
  t.deepEqual(
    refCandidates("DEADBEEF1").map((c) => c.kind),
    ["branch", "tag", "commit"],
  );
  t.is(refCandidates("DEADBEEF1")[2]?.rev, "deadbeef1");
});

test("deploy refs - SHAs are 7 to 40 hex digits", (t) => {
  t.true(isCommitSha("abc1234"));
  t.true(isCommitSha("a".repeat(40)));
  t.false(isCommitSha("abc123"));
  t.false(isCommitSha("a".repeat(41)));
  t.false(isCommitSha("release-1"));
});

test("deploy refs - options, revision syntax and control characters are refused", (t) => {
  for (const ok of ["main", "release/1.2", "v2", "feature_x", "a".repeat(40)]) t.true(validRef(ok), ok);
  for (const bad of [
    "",
    "-c",
    "--upload-pack=x",
    "/abs",
    "a..b",
    "main@{1}",
    "main^",
    "main~1",
    "a:b",
    "a b",
    "a\nb",
    "a\u0000b",
    "x*",
    "x[",
    "x\\y",
    "end/",
    "x.lock",
  ]) {
    t.false(validRef(bad), JSON.stringify(bad));
  }
});

test("deploy refs - a pull or merge request's head ref is read as it is, after the branch and tag", (t) => {
  t.deepEqual(
    refCandidates("refs/pull/12/head").map((c) => c.rev),
    ["refs/heads/refs/pull/12/head", "refs/tags/refs/pull/12/head", "refs/pull/12/head"],
  );
  t.is(refCandidates("refs/merge-requests/3/head").at(-1)?.rev, "refs/merge-requests/3/head");
  t.is(refCandidates("refs/pull/x/head").length, 2);
});
