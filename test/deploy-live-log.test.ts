// A deployment's live log under a burst of progress (issue 11): a build that
// prints a line every millisecond makes the real agent send its progress
// messages back to back, and a follower of GET .../deployments/{id}/log must
// still get every one of them, in order, with no gap (seq 1, 2, 3...), then the
// end. The gateway records one agent's progress in the order it was sent, and
// before the result that finishes the operation: a follower reads by seq and
// stops at the end, so a message written late would never reach it.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { BASE_IMAGE } from "./harness/containers";
import { type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { APP_PORT, createAppRepo } from "./harness/git-repo";
import { readSse } from "./harness/sse";

const LINES = 400;

let s: DeployStack;
test.before(async () => {
  s = await startDeployStack();
});
test.after.always(cleanupAll);

test("live log - a burst of build output reaches the follower whole and in order", async (t) => {
  const repo = await createAppRepo({ first: "burst" });
  // One line per millisecond from a RUN step: podman streams it, the agent sends each chunk.
  const dockerfile = [
    `FROM ${BASE_IMAGE}`,
    `RUN i=0; while [ $i -lt ${LINES} ]; do echo "burst line $i"; i=$((i+1)); usleep 1000; done`,
    "COPY www /www",
    `CMD ["httpd", "-f", "-p", "${APP_PORT}", "-h", "/www"]`,
  ];
  writeFileSync(join(repo.path, "Dockerfile"), `${dockerfile.join("\n")}\n`);
  await repo.git(["commit", "-q", "-am", "Build loudly"]);
  const app = await s.createApp({}, repo);

  const started = await s.deploy(app.id);
  t.is(started.status, 202, describe(started));
  const id = String(started.json.deployment_id);
  const sse = await readSse(
    `${s.c.baseUrl}/api${s.appPath(app.id, `/deployments/${id}/log`)}`,
    { "x-api-key": s.apiKey },
    180_000,
  );
  t.is(sse.status, 200, sse.text);
  const end = sse.events[sse.events.length - 1]!;
  t.is(end.event, "end");
  t.like(JSON.parse(end.data), { deployment_id: id, status: "completed" });

  const progress = sse.events
    .filter((e) => e.event === "progress")
    .map((e) => JSON.parse(e.data) as { seq: number; step: string; status: string; log: string });
  t.true(progress.length > 20, `only ${progress.length} progress events`);
  t.deepEqual(
    progress.map((p) => p.seq),
    progress.map((_, i) => i + 1),
    "every progress message, in order, none missing",
  );
  const build = progress
    .filter((p) => p.step === "build")
    .map((p) => p.log)
    .join("");
  const lines = [...build.matchAll(/burst line (\d+)/g)].map((m) => Number(m[1]));
  t.deepEqual(
    lines,
    Array.from({ length: LINES }, (_, i) => i),
  );
  for (const step of ["fetch", "build", "start", "health_check", "switch"])
    t.true(
      progress.some((p) => p.step === step && p.status === "succeeded"),
      `${step} succeeded before the end`,
    );
});
