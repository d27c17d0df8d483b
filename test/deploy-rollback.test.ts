// Releases and rollback through the API, a real agent, podman and Caddy (issue
// 29): every deployment that switched is a release (image id, configuration
// hash, commit, who); a rollback starts a kept release's image with that
// release's configuration and builds nothing; retention keeps the images of the
// newest keep_releases releases, and a failed deployment in between costs no
// release its image (its own image goes with its container); a rollback to a
// pruned release is refused with 409, naming it; a steady request stream sees
// no failure across a rollback.
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { appImageIds } from "./harness/containers";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { type ApiResponse, api } from "./harness/http";
import { proxyGet } from "./harness/proxy-client";
import { startTraffic } from "./harness/traffic";
import { pollUntil } from "./harness/wait";

let s: DeployStack;
let repo: AppRepo;
let app: App;

interface Release {
  deployment_id: string;
  live: boolean;
  image: string | null;
  image_id: string | null;
  image_kept: boolean;
  config_hash: string | null;
  commit_sha: string | null;
  rollback_of: string | null;
  triggered_by: { type: string; name: string | null };
  since: string;
  urls: string[];
}
type Step = { name: string; status: string; log: string };

test.before(async () => {
  repo = await createAppRepo({ first: "1" });
  s = await startDeployStack();
  app = await s.createApp({}, repo);
});
test.after.always(cleanupAll);

const rollback = (body: Record<string, unknown>) =>
  api(s.c, "/rollback", { body: { application_id: app.id, ...body } });

async function rollbackAndWait(body: Record<string, unknown> = {}) {
  const started = await rollback(body);
  if (started.status !== 202) throw new Error(`POST /rollback: ${describe(started)}`);
  const op = await s.waitOperation(String(started.json.operation_id));
  return { started, op, deploymentId: String(started.json.deployment_id) };
}

async function releases(): Promise<Release[]> {
  const res = await s.manage(s.appPath(app.id, "/releases"));
  if (res.status !== 200) throw new Error(`GET releases: ${describe(res)}`);
  return res.json.releases as Release[];
}

async function steps(id: string): Promise<Step[]> {
  const res = await s.deployment(app.id, id);
  return res.json.steps as Step[];
}

/** The application's images on the shared podman, by id. */
const imageIds = () => appImageIds(app.id);

const body = async () => (await proxyGet(s.proxyPort, app.fqdn)).body;
const envOf = async (name: string) => (await proxyGet(s.proxyPort, app.fqdn, `/cgi-bin/env?${name}`)).body;

async function deployed(label: string, env?: Record<string, string>) {
  if (env) t_ok(await s.setEnv(app.id, env), 200);
  await repo.commitVersion(label);
  const d = await s.deployAndWait(app.id);
  if (d.op.json.status !== "completed") throw new Error(`deploy ${label}: ${describe(d.op)}`);
  return d.deploymentId;
}

function t_ok(res: ApiResponse, status: number) {
  if (res.status !== status) throw new Error(`${res.status}: ${res.text}`);
}

test.serial(
  "rollback - to the previous and to an older release, with its configuration and no build",
  async (t) => {
    t_ok(await s.setEnv(app.id, { GREETING: "first" }), 200);
    const first = await s.deployAndWait(app.id);
    t.like(first.op.json, { status: "completed" }, describe(first.op));
    const second = await deployed("2", { GREETING: "second" });
    t.is(await body(), "version 2");
    t.is(await envOf("GREETING"), "second");

    const listed = await releases();
    t.deepEqual(
      listed.map((r) => [r.deployment_id, r.live]),
      [
        [second, true],
        [first.deploymentId, false],
      ],
    );
    t.regex(listed[0]!.image_id ?? "", /^sha256:[0-9a-f]{64}$/);
    t.not(listed[0]!.config_hash, listed[1]!.config_hash, "different env, different configuration hash");
    t.true(listed.every((r) => r.image_kept));
    const imagesBefore = await imageIds();

    // To the previous release (the default), under a steady stream of requests.
    const traffic = startTraffic(s.proxyPort, app.fqdn);
    const back = await rollbackAndWait();
    t.like(back.op.json, { status: "completed" }, describe(back.op));
    t.is(await body(), "version 1");
    t.is(await envOf("GREETING"), "first", "the release's stored env, not the application's current one");
    const report = await traffic.stop();
    t.deepEqual(report.failures, [], `${report.failed} of ${report.total} requests failed`);
    t.deepEqual(report.sequence, ["version 2", "version 1"]);

    const st = await steps(back.deploymentId);
    t.like(
      st.find((x) => x.name === "fetch"),
      { status: "skipped" },
    );
    const build = st.find((x) => x.name === "build")!;
    t.is(build.status, "succeeded");
    t.regex(build.log, new RegExp(`rollback to release ${first.deploymentId}: .* nothing to build`));
    t.notRegex(build.log, /building|STEP \d/i, "nothing was built");
    t.deepEqual(await imageIds(), imagesBefore, "no image was built or removed");

    // The application shows the rollback as its live release, with the first's commit and image.
    const shown = await s.manage(`/applications/${app.id}`);
    const live = shown.json.live_release as Release;
    t.like(live, {
      deployment_id: back.deploymentId,
      rollback_of: first.deploymentId,
      commit_sha: listed[1]!.commit_sha,
      image_id: listed[1]!.image_id,
      config_hash: listed[1]!.config_hash,
      live: true,
    });
    t.deepEqual(live.urls, shown.json.urls);

    // To an older release by its id: the second again.
    const again = await rollbackAndWait({ release: second });
    t.like(again.op.json, { status: "completed" }, describe(again.op));
    t.is(await body(), "version 2");
    t.is(await envOf("GREETING"), "second");

    // Audited as a deploy operation naming the release.
    const audit = await s.manage(`/audit?operation_id=${again.started.json.operation_id}`);
    const event = (audit.json.events as { payload: Record<string, unknown> }[])[0];
    t.like(event?.payload, { rollback_of: second }, describe(audit));
  },
);

test.serial(
  "rollback - refused for an unknown release and when there is nothing to roll back to",
  async (t) => {
    const unknown = await rollback({ release: "00000000-0000-4000-8000-000000000000" });
    t.is(unknown.status, 404, describe(unknown));
    t.regex(String(unknown.json.detail), /release '00000000-0000-4000-8000-000000000000' not found/);

    const lone = await s.createApp({}, repo);
    const none = await api(s.c, "/rollback", { body: { application_id: lone.id } });
    t.is(none.status, 409, describe(none));
    t.regex(String(none.json.detail), /has no release yet/);
  },
);

test.serial(
  "retention - a failed deploy in between keeps every release's image; a pruned release is refused",
  async (t) => {
    t_ok(await s.manage(`/applications/${app.id}`, { method: "PATCH", body: { keep_releases: 3 } }), 200);
    const before = await releases();
    const liveImage = before[0]!.image_id!;

    // A deployment that fails its health check: its container and its image go, nothing else.
    await repo.commitBroken("broken");
    const failed = await s.deployAndWait(app.id, { timeout_seconds: 30 });
    t.is(failed.op.json.status === "completed", false, describe(failed.op));
    const failedSteps = await steps(failed.deploymentId);
    t.regex(failedSteps.find((x) => x.status === "failed")!.log, /removed the new image/);
    const afterFailure = await imageIds();
    t.true(afterFailure.includes(liveImage), "the live release's image stays");
    for (const r of before.filter((x) => x.image_kept))
      t.true(afterFailure.includes(r.image_id!), `${r.deployment_id}'s image stays`);
    t.is(await body(), "version 2");

    // Three more releases: with keep_releases 3, only their images stay.
    const ids = [await deployed("4"), await deployed("5"), await deployed("6")];
    const listed = await releases();
    t.deepEqual(
      listed.slice(0, 3).map((r) => r.deployment_id),
      ids.reverse(),
    );
    t.deepEqual(
      listed.map((r) => r.image_kept),
      listed.map((_, i) => i < 3),
    );
    const kept = listed.slice(0, 3).map((r) => r.image_id!);
    // The retire prunes after the result: wait for it to have run.
    await pollUntil(async () => ((await imageIds()).join() === [...kept].sort().join() ? true : undefined), {
      what: "the application's images to be the three newest releases'",
      timeoutMs: 60_000,
    });

    const pruned = listed[3]!;
    const refused = await rollback({ release: pruned.deployment_id });
    t.is(refused.status, 409, describe(refused));
    t.is(refused.json.release, pruned.deployment_id);
    t.regex(
      String(refused.json.detail),
      new RegExp(`release ${pruned.deployment_id} is no longer on the server`),
    );
    t.is(await body(), "version 6", "nothing changed");

    // The oldest kept one still rolls back.
    const back = await rollbackAndWait({ release: listed[2]!.deployment_id });
    t.like(back.op.json, { status: "completed" }, describe(back.op));
    t.is(await body(), "version 4");
  },
);
