// Fleets behind a load balancer (issue 33, "Traffic"): every route's health path
// /.well-known/relayctl/health is answered by the server's own Caddy, 200 while
// the application is live there and 503 while a rollout drains it. Two real
// servers (harness/fleet-stack.ts), each with its agent, podman store and Caddy.
//   - drain_seconds=0 (the default): the health path never answers 503;
//   - drain_seconds=2: server a's health path goes 200 → 503 → 200, the 503 seen
//     before a's deployment switched, while its own `/` still answers from the
//     old release.
import { setTimeout as delay } from "node:timers/promises";
import test from "ava";
import type { ApiResponse } from "./harness/http";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type App, type AppFields, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type FleetServer, addFleetServer } from "./harness/fleet-stack";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { proxyGet } from "./harness/proxy-client";

const HEALTH = "/.well-known/relayctl/health";
// How often the watcher asks, as a load balancer's check interval would (not a wait for an outcome).
const POLL_MS = 10;

let s: DeployStack;
let repo: AppRepo;
let app: App;
let a: FleetServer;
let b: FleetServer;
const tag = `d${Math.random().toString(36).slice(2, 7)}`;

test.before(async () => {
  repo = await createAppRepo({ first: "1" });
  s = await startDeployStack();
  [a, b] = await Promise.all([addFleetServer(s, `${tag}-a`), addFleetServer(s, `${tag}-b`)]);
  const fields = {
    server_id: a.id,
    health_check_timeout_seconds: 4,
    placement: { servers: [a.name, b.name] },
  } as AppFields;
  app = await s.createApp(fields, repo);
});
test.after.always(cleanupAll);

interface Seen {
  /** When the health path's answer arrived (it was produced before this). */
  at: number;
  health: number;
  /** When the answer of `/` arrived. */
  rootAt: number;
  body: string;
}

/** Asks server a's Caddy for the health path and `/` (with the app's Host) until stopped. */
function watch(srv: FleetServer) {
  const seen: Seen[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const health = await proxyGet(srv.proxyPort, app.fqdn, HEALTH).catch(() => undefined);
      const at = Date.now();
      const root = await proxyGet(srv.proxyPort, app.fqdn).catch(() => undefined);
      const rootAt = Date.now();
      if (health && root)
        seen.push({ at, health: health.status, rootAt, body: `${root.status} ${root.body}` });
      await delay(POLL_MS);
    }
  })();
  return async () => {
    stopped = true;
    await loop;
    return seen;
  };
}

/** Consecutive duplicates collapsed: 200 200 503 200 → 200 503 200. */
const runs = (xs: number[]) => xs.filter((x, i) => i === 0 || xs[i - 1] !== x);

async function rollOut(strategy: Record<string, unknown>, early?: (started: ApiResponse) => Promise<void>) {
  const started = await s.deploy(app.id, { strategy } as Record<string, unknown>);
  if (started.status !== 202) throw new Error(`POST /deploy: ${describe(started)}`);
  await early?.(started);
  const op = await s.waitOperation(String(started.json.operation_id), 240_000);
  const res = await s.manage(`/applications/${app.id}/rollouts/${started.json.rollout_id}`);
  return { started, op, rollout: res.json as { status: string; servers: { deployment_id: string }[] } };
}

test.serial("fleets drain - a bad drain_seconds is refused with a detail", async (t) => {
  const res = await s.deploy(app.id, { strategy: { drain_seconds: 601 } } as Record<string, unknown>);
  t.is(res.status, 422, describe(res));
  t.regex(String(res.json.detail), /drain_seconds/);
});

test.serial("fleets drain - without drain_seconds the health path never answers 503", async (t) => {
  const stop = watch(a);
  const { started, op, rollout } = await rollOut({ max_parallel: 1 });
  const seen = await stop();
  t.is(started.json.deployment_id, rollout.servers[0]!.deployment_id, "the answer names a's deployment");
  t.like(op.json, { status: "completed" }, describe(op));
  t.is(rollout.status, "succeeded");
  t.false(
    seen.some((x) => x.health === 503),
    JSON.stringify(runs(seen.map((x) => x.health))),
  );
  t.deepEqual(await proxyGet(a.proxyPort, app.fqdn, HEALTH), { status: 200, body: "live\n" });
  t.is((await proxyGet(b.proxyPort, app.fqdn, HEALTH)).status, 200);
});

test.serial(
  "fleets drain - with drain_seconds=2 server a answers 200 → 503 → 200, drained before its switch, its old release still serving",
  async (t) => {
    await repo.commitVersion("2");
    const stop = watch(a);
    // Asked at once, inside the 2 s drain: a's deployment is not there yet, and the 404 says why.
    let early: ApiResponse | undefined;
    const { started, op, rollout } = await rollOut({ max_parallel: 1, drain_seconds: 2 }, async (st) => {
      early = await s.deployment(app.id, String(st.json.deployment_id));
    });
    const seen = await stop();
    t.is(early!.status, 404, describe(early!));
    t.is(early!.json.rollout_id, started.json.rollout_id);
    t.regex(
      String(early!.json.detail),
      new RegExp(`has not started yet: rollout '${started.json.rollout_id}' starts it on server '${a.name}'`),
    );
    // The answer's deployment_id became server a's deployment once its drain ended.
    t.not(started.json.deployment_id, started.json.rollout_id);
    t.is(started.json.deployment_id, rollout.servers[0]!.deployment_id);
    const mine = await s.deployment(app.id, String(started.json.deployment_id));
    t.is(mine.status, 200, describe(mine));
    t.like(mine.json, { status: "completed" });
    t.like(op.json, { status: "completed" }, describe(op));
    t.is(rollout.status, "succeeded");
    t.deepEqual(runs(seen.map((x) => x.health)), [200, 503, 200]);
    const dep = await s.deployment(app.id, rollout.servers[0]!.deployment_id);
    const steps = dep.json.steps as { name: string; started_at: string; ended_at: string | null }[];
    const switched = Date.parse(steps.find((x) => x.name === "switch")!.started_at);
    const draining = seen.filter((x) => x.health === 503);
    t.true(draining[0]!.at < switched, `first 503 at ${draining[0]!.at}, switch at ${switched}`);
    // At least drain_seconds of 503 before the deployment began to switch.
    t.true(switched - draining[0]!.at >= 2000, `${switched - draining[0]!.at} ms drained before the switch`);
    const before = draining.filter((x) => x.rootAt < switched).map((x) => x.body);
    t.true(before.length > 0);
    t.deepEqual([...new Set(before)], ["200 version 1"], "the old release answers while draining");
    // The switch's own route write keeps the drain (the route ledger has it): 503 lasts until the
    // deployment ends, so no answer says live before the switch step has ended. (Since the deploy
    // got faster, switch to undrain can take less than one poll: the last 503 seen may predate
    // the switch's start; a live answer arriving before the switch ended is what the bug shows.)
    const switchEnded = Date.parse(steps.find((x) => x.name === "switch")!.ended_at!);
    const liveAgain = seen.find((x) => x.at > draining[0]!.at && x.health === 200);
    t.true(liveAgain!.at >= switchEnded, `live again at ${liveAgain!.at}, switch ended at ${switchEnded}`);
    t.deepEqual(await proxyGet(a.proxyPort, app.fqdn), { status: 200, body: "version 2" });
    t.deepEqual(await proxyGet(a.proxyPort, app.fqdn, HEALTH), { status: 200, body: "live\n" });
  },
);
