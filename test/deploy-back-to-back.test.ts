// Deploys back to back through the API, a real agent, podman and Caddy (issue 29):
// the next deployment of an application starts while the previous one's old
// container still drains, instead of waiting out the drain in the agent's
// queue; the retire says in its log that it runs in the background, with its
// time; every old container goes in the end, and a steady request stream sees
// no failure across both switches and retires.
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { proxyGet } from "./harness/proxy-client";
import { startTraffic } from "./harness/traffic";
import { pollUntil } from "./harness/wait";

/** Long enough that a deployment waiting for the drain could not hide inside it. */
const DRAIN_SECONDS = 15;

let s: DeployStack;
let repo: AppRepo;
let app: App;
type Step = { name: string; status: string; log: string; started_at: string; ended_at: string | null };
type View = Record<string, unknown> & { steps: Step[] };

test.before(async () => {
  repo = await createAppRepo({ first: "1" });
  s = await startDeployStack({ agentEnv: { RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: String(DRAIN_SECONDS) } });
  app = await s.createApp({}, repo);
});
test.after.always(cleanupAll);

async function view(id: string): Promise<View> {
  const res = await s.deployment(app.id, id);
  if (res.status !== 200) throw new Error(`GET deployment ${id}: ${describe(res)}`);
  return res.json as View;
}

const step = (v: View, name: string) => v.steps.find((x) => x.name === name);

async function waitRetired(id: string): Promise<View> {
  return pollUntil(
    async () => {
      const v = await view(id);
      return step(v, "retire")?.status === "succeeded" ? v : undefined;
    },
    // Not faster: the dashboard key this reads with allows 100 requests a minute.
    { what: `deployment ${id} to retire its old container`, timeoutMs: 120_000, intervalMs: 1_000 },
  );
}

test.serial(
  "deploy back to back - the next deploy starts while the old container drains; nothing fails",
  async (t) => {
    const first = await s.deployAndWait(app.id);
    t.like(first.op.json, { status: "completed" }, describe(first.op));
    await waitRetired(first.deploymentId);
    const v1 = await view(first.deploymentId);

    const traffic = startTraffic(s.proxyPort, app.fqdn);
    await repo.commitVersion("2");
    const second = await s.deployAndWait(app.id);
    t.like(second.op.json, { status: "completed" }, describe(second.op));
    await repo.commitVersion("3");
    const third = await s.deployAndWait(app.id);
    t.like(third.op.json, { status: "completed" }, describe(third.op));
    t.is((await proxyGet(s.proxyPort, app.fqdn)).body, "version 3");

    const v2 = await waitRetired(second.deploymentId);
    const v3 = await waitRetired(third.deploymentId);
    // The third began before the second's retire ended: it did not wait for the drain.
    const thirdBegan = Date.parse(v3.steps[0]!.started_at);
    const secondRetired = Date.parse(String(step(v2, "retire")!.ended_at));
    t.true(
      thirdBegan < secondRetired,
      `the third began at ${v3.steps[0]!.started_at}, the second's retire ended at ${step(v2, "retire")!.ended_at}`,
    );
    t.deepEqual(
      v3.steps.map((x) => x.name),
      ["fetch", "build", "start", "health_check", "switch", "retire"],
      "no queue wait on the agent",
    );
    // The retire's first line: when, what, and that it goes on in the background.
    t.regex(
      step(v2, "retire")!.log,
      new RegExp(
        `^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z old: ${v1.container_name}; retired in the background after a ${DRAIN_SECONDS} s drain`,
      ),
    );

    await pollUntil(
      async () => {
        const names = await s.containersOf(app.id);
        return names.length === 1 && names[0] === v3.container_name ? true : undefined;
      },
      { what: "the third deployment's container to be the only one", timeoutMs: 60_000 },
    );
    const report = await traffic.stop();
    t.deepEqual(report.failures, [], `${report.failed} of ${report.total} requests failed`);
    t.deepEqual(report.sequence, ["version 1", "version 2", "version 3"]);
    t.is(report.stale, 0);
  },
);

test.serial(
  "deploy back to back - two deploys POSTed together: the second's log says what it waits for, with times",
  async (t) => {
    await repo.commitVersion("4");
    const [a, b] = await Promise.all([s.deploy(app.id), s.deploy(app.id)]);
    t.is(a.status, 202, describe(a));
    t.is(b.status, 202, describe(b));
    // Request order decides which one waits: the one the control plane recorded second.
    const ops = await Promise.all([a, b].map((r) => s.waitOperation(String(r.json.operation_id))));
    for (const op of ops) t.like(op.json, { status: "completed" }, describe(op));
    const views = await Promise.all([a, b].map((r) => view(String(r.json.deployment_id))));
    const waiting = views.filter((v) => step(v, "queue")?.log.includes("waiting for deployment"));
    t.is(waiting.length, 1, "exactly one of the two waited for the other");
    const [second] = waiting;
    const first = views.find((v) => v !== second)!;
    const log = step(second!, "queue")!.log;
    const time = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z";
    t.regex(log, new RegExp(`^${time} waiting for deployment ${first.deployment_id} to finish\\n`));
    t.regex(log, new RegExp(`\\n${time} deployment ${first.deployment_id} finished; waited \\d+\\.\\d s\\n`));
    t.is(step(second!, "queue")!.status, "succeeded");
    t.is(second!.steps[0]!.name, "queue", "the wait comes first");
  },
);
