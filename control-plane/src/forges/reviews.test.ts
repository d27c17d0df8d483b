// How a GitLab merge request and a Gitea/Forgejo pull request, as their
// documented payloads say them (test/fixtures/forges/), read as previews' events.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import type { ConnectionRow } from "./connections.js";
import { readRequest } from "./reviews.js";

// biome-ignore lint/suspicious/noExplicitAny: fixtures edited field by field
type Json = Record<string, any>;
const fixture = (name: string): Json =>
  JSON.parse(readFileSync(join(__dirname, "../../../test/fixtures/forges", name), "utf8")) as Json;
const conn = (kind: ConnectionRow["kind"]) => ({ kind }) as ConnectionRow;

test("forge reviews - GitLab's merge request example opens a preview from refs/merge-requests/<iid>/head", (t) => {
  const r = readRequest(conn("gitlab"), fixture("gitlab-merge-request.json"));
  t.like(r, {
    source: "gitlab",
    number: 1,
    action: "opened",
    headSha: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
    headRef: "ms-viewport",
    fromFork: false,
    fetchRef: "refs/merge-requests/1/head",
    author: "root",
  });
});

test("forge reviews - GitLab: update with oldrev updates, without changes nothing; merge and close close; another project's source is a fork", (t) => {
  const p = fixture("gitlab-merge-request.json");
  p.object_attributes.action = "update";
  t.regex(String(readRequest(conn("gitlab"), p)), /changes no code/);
  p.object_attributes.oldrev = "95790bf891e76fee5e1747ab589903a6a1f80f22";
  t.like(readRequest(conn("gitlab"), p), { action: "updated" });
  for (const a of ["merge", "close"]) {
    p.object_attributes.action = a;
    t.like(readRequest(conn("gitlab"), p), { action: "closed" });
  }
  p.object_attributes.action = "approved";
  t.is(typeof readRequest(conn("gitlab"), p), "string");
  p.object_attributes.action = "open";
  p.object_attributes.source_project_id = 99;
  t.like(readRequest(conn("gitlab"), p), { fromFork: true });
});

test("forge reviews - Gitea's pull request opens from refs/pull/<n>/head; synchronized updates; a head in another repository is a fork", (t) => {
  const p = fixture("gitea-pull-request.json");
  for (const kind of ["gitea", "forgejo"] as const)
    t.like(readRequest(conn(kind), p), {
      source: "gitea",
      number: 2,
      action: "opened",
      headSha: "bffeb74224043ba2feb48d137756c8a9331c449a",
      headRef: "develop",
      fromFork: false,
      fetchRef: "refs/pull/2/head",
    });
  p.action = "synchronized";
  t.like(readRequest(conn("gitea"), p), { action: "updated" });
  p.action = "closed";
  t.like(readRequest(conn("gitea"), p), { action: "closed" });
  p.action = "edited";
  t.is(typeof readRequest(conn("gitea"), p), "string");
  p.action = "opened";
  p.pull_request.head.repo = { ...p.pull_request.head.repo, id: 141 };
  t.like(readRequest(conn("gitea"), p), { fromFork: true });
});
