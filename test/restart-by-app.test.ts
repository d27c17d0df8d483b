// Restart by application (issue 29): POST /api/automation/v1/restart with an
// application's linked_container_name restarts its live container on that server
// (deployed ones are `<name>-<8 hex>`, a new name at every deploy), the exact name
// of a deployed container stays as it is, a name that is no live application's
// goes to the engine as given (an external deploy's container), and
// `relayctl restart <app>` does the same from the CLI. A real agent, podman, Caddy.
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import { CliUser, collect, waitForStderr } from "./harness/cli";
import { BASE_IMAGE, podman } from "./harness/containers";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { api } from "./harness/http";
import { Browser, createOwner } from "./harness/people";
import { proxyGet } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

let s: DeployStack;
let repo: AppRepo;
let app: App;
let u: CliUser;

test.before(async () => {
  repo = await createAppRepo({ first: "1" });
  s = await startDeployStack({ serverEnv: { RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: "1" } });
  app = await s.createApp({}, repo);
  const owner = await createOwner(s.c.db.url, s.c.tenantId);
  const browser = new Browser(s.c.baseUrl);
  await browser.signIn(owner);
  u = new CliUser();
  const child = u.spawn(["login", "--url", s.c.baseUrl]);
  const done = collect(child);
  const [, uri] = await waitForStderr(child, /\(or open (\S+)\)/);
  await browser.answerDevice(uri, "approve");
  if ((await done).code !== 0) throw new Error("login failed");
});
test.after.always(cleanupAll);

const startedAt = async (name: string) =>
  (await podman(["inspect", "--format", "{{.State.StartedAt}}", name])).stdout.trim();

const restart = (containerName: string) =>
  api(s.c, "/restart", { body: { server_id: s.c.serverId, container_name: containerName } });

/** Deploys and returns the live container's name. */
async function deployLive(): Promise<string> {
  const d = await s.deployAndWait(app.id);
  if (d.op.json.status !== "completed") throw new Error(`deploy: ${describe(d.op)}`);
  const v = await s.deployment(app.id, d.deploymentId);
  return String(v.json.container_name);
}

/** The newest deployment's container: the live one (every deploy here completes). */
async function liveName(): Promise<string> {
  const deployments = (await s.history(app.id)).json.deployments as { container_name: string }[];
  return deployments[0]!.container_name;
}

/** The restart operation's audit fields. */
async function audited(operationId: string): Promise<Record<string, unknown>> {
  const res = await s.manage(`/audit?operation_id=${operationId}`);
  const events = res.json.events as { event_type: string; payload: Record<string, unknown> }[];
  const e = events.find((x) => x.event_type === "operation.restart");
  if (!e) throw new Error(`no operation.restart event: ${describe(res)}`);
  return e.payload;
}

async function servesAgain(): Promise<void> {
  await pollUntil(
    async () =>
      (await proxyGet(s.proxyPort, app.fqdn).catch(() => undefined))?.status === 200 ? true : undefined,
    { what: "the application to answer again", timeoutMs: 30_000 },
  );
}

test.serial(
  "restart - an application's linked container name restarts its live container, new at every deploy",
  async (t) => {
    t.regex(app.name, /^app-/);
    const live = await deployLive();
    t.regex(live, new RegExp(`^${app.name}-[0-9a-f]{8}$`));
    const before = await startedAt(live);
    const r = await restart(app.name);
    t.is(r.status, 200, describe(r));
    t.like(r.json, { status: "completed", exit_code: 0 }, describe(r));
    t.not(await startedAt(live), before, "the live container was restarted");
    t.like(await audited(String(r.json.operation_id)), {
      container_name: live,
      requested_name: app.name,
      application_id: app.id,
    });
    await servesAgain();

    // The next deploy's container has another name; the application's name follows it.
    await repo.commitVersion("2");
    const next = await deployLive();
    t.not(next, live);
    const nextBefore = await startedAt(next);
    const again = await restart(app.name);
    t.like(again.json, { status: "completed", exit_code: 0 }, describe(again));
    t.not(await startedAt(next), nextBefore);
    await servesAgain();
    t.is((await proxyGet(s.proxyPort, app.fqdn)).body, "version 2");
  },
);

test.serial("restart - the exact name of a deployed container stays as it is", async (t) => {
  const live = await liveName();
  const before = await startedAt(live);
  const r = await restart(live);
  t.like(r.json, { status: "completed", exit_code: 0 }, describe(r));
  t.not(await startedAt(live), before);
  const payload = await audited(String(r.json.operation_id));
  t.is(payload.container_name, live);
  t.false("requested_name" in payload);
  await servesAgain();
});

test.serial(
  "restart - an application with no deployed container: its name goes to the engine as given",
  async (t) => {
    // An external deploy's application: CI runs the container under the linked name itself.
    // No repository and no build (null: AppFields has no null for it, the API takes it).
    const ext = await s.createApp({ git_repository: null, build: null as unknown as undefined });
    await podman(["run", "-d", "--init", "--name", ext.name, BASE_IMAGE, "sleep", "2147483647"]);
    onCleanup(() => podman(["rm", "-f", "-t", "0", ext.name]).then(() => undefined));
    const before = await startedAt(ext.name);
    const r = await restart(ext.name);
    t.like(r.json, { status: "completed", exit_code: 0 }, describe(r));
    t.not(await startedAt(ext.name), before);
    t.is((await audited(String(r.json.operation_id))).container_name, ext.name);
  },
);

test.serial("cli restart - relayctl restart <app> restarts the application's live container", async (t) => {
  const live = await liveName();
  const before = await startedAt(live);
  const r = await u.run(["restart", app.name]);
  t.is(r.code, 0, `${r.stdout}\n${r.stderr}`);
  t.regex(r.stdout, /^status\s+completed$/m);
  t.not(await startedAt(live), before);
  await servesAgain();
});
