// A build whose output comes in pieces (issue 31, defect 3): the Dockerfile's RUN
// prints each line in three writes a moment apart, so the agent reads chunks
// that end mid-line, and slowly enough that a follower sees the build running
// for seconds. Every line is `LINE <nnn>: a…a b…b c…c END`; a consumer that cuts
// a line shows a piece that does not match chunkyLine.
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { BASE_IMAGE } from "./containers";
import { APP_PORT, type AppRepo } from "./git-repo";

const PIECE = 100;

/** The whole text of line i, as the build prints it. */
export function chunkyLine(i: number): string {
  const n = String(i).padStart(3, "0");
  return `LINE ${n}: ${"a".repeat(PIECE)} ${"b".repeat(PIECE)} ${"c".repeat(PIECE)} END`;
}

/** Any text that starts like a build line; a whole one equals chunkyLine of its number. */
export const CHUNKY_START = /^LINE \d{3}:/;

/** Commits a Dockerfile whose build prints `lines` lines, each in 3 writes `pauseMs` apart. */
export async function commitChunkyBuild(repo: AppRepo, lines: number, pauseMs = 20): Promise<void> {
  const us = pauseMs * 1000;
  const [a, b, c] = ["a", "b", "c"].map((x) => x.repeat(PIECE));
  const run = [
    // A RUN instruction the engine has not seen: its layer cache (shared by every build on
    // the machine, kept between runs) would otherwise skip the printing after a first run.
    `: ${randomUUID()};`,
    `i=0; while [ $i -lt ${lines} ]; do`,
    `printf 'LINE %03d: ${a}' $i; usleep ${us};`,
    `printf ' ${b}'; usleep ${us};`,
    `printf ' ${c} END\\n';`,
    "i=$((i+1)); done",
  ].join(" ");
  const dockerfile = [
    `FROM ${BASE_IMAGE}`,
    `RUN ${run}`,
    "COPY www /www",
    `CMD ["httpd", "-f", "-p", "${APP_PORT}", "-h", "/www"]`,
  ];
  writeFileSync(join(repo.path, "Dockerfile"), `${dockerfile.join("\n")}\n`);
  await repo.git(["commit", "-q", "-am", "Build in pieces"]);
}
