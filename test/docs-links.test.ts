// The documents' links: every relative link in the READMEs and docs/ must reach a file of the
// repository, and every `#anchor` a heading of the page it names, as GitHub renders them. The
// reference moved out of the README into docs/ (issue 28), so pages now point at each other a lot,
// and a renamed heading or moved page breaks links silently: nothing else reads them.
// External http(s) links are not fetched (the tests run without the network, and a remote site
// being down is not a bug of ours).
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import test from "ava";

const REPO = resolve(__dirname, "..");

/** The pages checked: what a reader of the repository opens. */
function documents(root: string): string[] {
  const found: string[] = [];
  const add = (path: string) => {
    if (existsSync(join(root, path))) found.push(path);
  };
  add("README.md");
  for (const page of markdownUnder(root, "docs")) found.push(page);
  add("bench/README.md");
  for (const page of markdownUnder(root, "examples")) if (page.endsWith("/README.md")) found.push(page);
  add("test/README.md");
  add("action/README.md");
  return found;
}

function markdownUnder(root: string, dir: string): string[] {
  const abs = join(root, dir);
  if (!existsSync(abs)) return [];
  const pages: string[] = [];
  for (const entry of readdirSync(abs, { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory() && entry.name !== "node_modules") pages.push(...markdownUnder(root, path));
    else if (entry.isFile() && entry.name.endsWith(".md")) pages.push(path);
  }
  return pages.sort();
}

/** The page's lines with fenced code blocks blanked (links and headings there are not rendered). */
function proseLines(text: string): string[] {
  let fence: string | null = null;
  return text.split("\n").map((line) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === null && marker) {
      fence = marker;
      return "";
    }
    if (fence !== null) {
      if (marker?.[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) fence = null;
      return "";
    }
    // Indented code (4 spaces after a blank line) is code too; the pages use it for commands.
    return /^( {4}|\t)/.test(line) ? "" : line;
  });
}

/** Inline code spans removed, so `[a](b)` written as an example inside backticks is not a link. */
function withoutCodeSpans(line: string): string {
  return line.replace(/(`+)[\s\S]*?\1/g, "");
}

/**
 * GitHub's heading anchor (github-slugger, as github.com renders a heading): the heading's text as
 * rendered (code spans keep their content, link targets and emphasis markers go), lower case,
 * punctuation and symbols dropped except `-` and `_`, each space a `-`; a repeated slug gets -1, -2...
 */
function slugify(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/<[^>]+>/g, "")
    .replace(/`/g, "")
    .replace(/(^|[^\p{L}\p{N}])_+|_+(?=$|[^\p{L}\p{N}])/gu, "$1");
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor a page offers: its headings' slugs (with GitHub's -N for repeats) and HTML ids. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const lines = proseLines(text);
  lines.forEach((line, i) => {
    let heading: string | undefined;
    const atx = /^ {0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$/.exec(line);
    if (atx) heading = atx[1] ?? "";
    else if (
      i > 0 &&
      /^ {0,3}(=+|-+)\s*$/.test(line) &&
      lines[i - 1].trim() !== "" &&
      !/^\s*[-*|]/.test(lines[i - 1])
    )
      heading = lines[i - 1].trim();
    if (heading !== undefined) {
      const base = slugify(heading);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const m of line.matchAll(/<a\s[^>]*\b(?:name|id)="([^"]+)"/gi)) anchors.add(m[1]);
  });
  return anchors;
}

interface Link {
  line: number;
  target: string;
}

/** Inline links and images `[text](target "title")`, reference definitions, and HTML href/src. */
function linksOf(text: string): Link[] {
  const links: Link[] = [];
  proseLines(text).forEach((raw, i) => {
    const line = withoutCodeSpans(raw);
    // The target: <anything> or a run without spaces that may hold one level of balanced parentheses.
    for (const m of line.matchAll(
      /\]\(\s*(<[^>]*>|(?:[^\s()]|\([^\s()]*\))*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g,
    ))
      links.push({ line: i + 1, target: m[1].replace(/^<|>$/g, "") });
    const definition = /^ {0,3}\[[^\]]+\]:\s*(\S+)/.exec(line);
    if (definition) links.push({ line: i + 1, target: definition[1].replace(/^<|>$/g, "") });
    for (const m of line.matchAll(/<(?:a|img)\s[^>]*\b(?:href|src)="([^"]+)"/gi))
      links.push({ line: i + 1, target: m[1] });
  });
  return links;
}

/** What is wrong with each relative link of the pages under `root`, one line each. */
function brokenLinks(root: string, pages: string[] = documents(root)): string[] {
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (abs: string) => {
    const known = anchorCache.get(abs);
    if (known) return known;
    const set = anchorsOf(readFileSync(abs, "utf8"));
    anchorCache.set(abs, set);
    return set;
  };
  const broken: string[] = [];
  for (const page of pages) {
    const pageAbs = join(root, page);
    for (const { line, target } of linksOf(readFileSync(pageAbs, "utf8"))) {
      const where = `${page}:${line}: ${target}`;
      // Any scheme (http:, https:, mailto:...) is external; `//host` too.
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) continue;
      const hash = target.indexOf("#");
      const pathPart = decodeURI(hash === -1 ? target : target.slice(0, hash)).replace(/\?.*$/, "");
      const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
      // GitHub resolves `/x` from the repository's root, everything else from the page's folder.
      const abs =
        pathPart === ""
          ? pageAbs
          : pathPart.startsWith("/")
            ? join(root, pathPart)
            : resolve(dirname(pageAbs), pathPart);
      if (relative(root, abs).startsWith("..")) {
        broken.push(`${where}: leaves the repository`);
        continue;
      }
      if (!existsSync(abs)) {
        broken.push(`${where}: no such file`);
        continue;
      }
      if (anchor === null || anchor === "") continue;
      if (statSync(abs).isDirectory() || !abs.endsWith(".md")) {
        broken.push(`${where}: an anchor into a file that is not a Markdown page`);
        continue;
      }
      if (!anchors(abs).has(anchor)) broken.push(`${where}: no heading with the anchor #${anchor}`);
    }
  }
  return broken;
}

test("docs links - every relative link and #anchor of the READMEs and docs/ resolves", (t) => {
  const pages = documents(REPO);
  // The walk itself must find the pages, or an empty list would pass.
  for (const page of ["README.md", "docs/api.md", "bench/README.md", "test/README.md", "action/README.md"])
    t.true(pages.includes(page), `${page} is checked`);
  t.true(linksOf(readFileSync(join(REPO, "README.md"), "utf8")).length > 5, "the README's links are read");
  t.deepEqual(brokenLinks(REPO, pages), []);
});

test("docs links - a missing file, a missing anchor and a link out of the repository are reported", (t) => {
  const root = mkdtempSync(join(tmpdir(), "docs-links-"));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  writeFileSync(
    join(root, "README.md"),
    [
      "# Top",
      "[fine](docs/a.md#the-audit-trail) [fine too](#top) [repeat](docs/a.md#notes-1) [root](/docs/a.md)",
      "[gone](docs/missing.md) [no anchor](docs/a.md#nowhere) [out](../elsewhere.md) [here](#nothing)",
      "[web](https://example.com/x#y) `[code](not/a/link.md)`",
      "```",
      "[fenced](not/a/link.md)",
      "```",
    ].join("\n"),
  );
  mkdirSync(join(root, "docs"));
  writeFileSync(join(root, "docs", "a.md"), "# The audit trail\n\n## Notes\n\n## Notes\n");
  t.deepEqual(brokenLinks(root), [
    "README.md:3: docs/missing.md: no such file",
    "README.md:3: docs/a.md#nowhere: no heading with the anchor #nowhere",
    "README.md:3: ../elsewhere.md: leaves the repository",
    "README.md:3: #nothing: no heading with the anchor #nothing",
  ]);
});

test("docs links - anchors follow GitHub's slug rules", (t) => {
  t.is(
    slugify("Issue 17: the goals not met, against their floors (2026-11-26)"),
    "issue-17-the-goals-not-met-against-their-floors-2026-11-26",
  );
  t.is(slugify("Try it: `make dev`"), "try-it-make-dev");
  t.is(slugify("Rotating `RELAYCTL_MASTER_KEY`"), "rotating-relayctl_master_key");
  t.is(slugify("`*.localhost` on this machine"), "localhost-on-this-machine");
  t.is(slugify("Push to deploy with the GitHub App"), "push-to-deploy-with-the-github-app");
  t.is(
    slugify("Gateway ↔ agent (gRPC, proto/agent/v1/agent.proto)"),
    "gateway--agent-grpc-protoagentv1agentproto",
  );
  t.is(
    slugify("People, sign-in, OAuth (device flow) and the [CLI](cli.md)"),
    "people-sign-in-oauth-device-flow-and-the-cli",
  );
  t.deepEqual(
    [...anchorsOf("# A\n## Results\n```\n# not a heading\n```\n## Results\nSetext\n---\n")],
    ["a", "results", "results-1", "setext"],
  );
});
