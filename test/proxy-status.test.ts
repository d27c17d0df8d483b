// Issue 26, "the dev proxy crashing": the agent reports its reverse proxy's
// health. A real Caddy (test/harness/caddy.ts) and a real agent deploying with
// podman: with Caddy up GET /api/servers says caddy ok; Caddy killed, it turns
// ok=false with the reason, the agent logs one line, and a deployment fails at
// switch naming Caddy and its address and saying the route was not changed;
// Caddy started again, it turns ok=true and the agent says so.
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { CliUser } from "./harness/cli";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { pollUntil } from "./harness/wait";

interface Proxy {
  kind: string;
  ok: boolean;
  detail: string;
}

let s: DeployStack;
let repo: AppRepo;
let app: App;

test.before(async () => {
  repo = await createAppRepo({ first: "1" });
  // A 1 s recheck: the test waits on the periodic check, not on the default 30 s.
  s = await startDeployStack({ agentEnv: { RELAYCTL_AGENT_PROXY_RECHECK_SECONDS: "1" } });
  app = await s.createApp({}, repo);
});
test.after.always(cleanupAll);

/** GET /api/servers until the cluster server's proxy satisfies `ok`; returns it. */
function proxyOf(ok: (p: Proxy) => boolean, what: string): Promise<Proxy> {
  return pollUntil(
    async () => {
      const res = await s.manage("/servers");
      if (res.status !== 200) throw new Error(describe(res));
      const server = (res.json.servers as Array<{ id: string; proxy: Proxy | null }>).find(
        (x) => x.id === s.c.serverId,
      );
      return server?.proxy && ok(server.proxy) ? server.proxy : undefined;
    },
    { what, timeoutMs: 30_000, intervalMs: 250 },
  );
}

const cli = () => new CliUser({ RELAYCTL_URL: s.c.baseUrl, RELAYCTL_TOKEN: s.apiKey });

const agentLine = (pred: (msg: string) => boolean, what: string) =>
  s.c.agent.proc.waitForLine((l) => pred(String(l.json?.msg ?? "")), { timeoutMs: 30_000, what });

test.serial("proxy - caddy up: GET /api/servers and relayctl servers say caddy ok", async (t) => {
  const adminUrl = s.caddy!.adminUrl;
  const proxy = await proxyOf(() => true, "GET /api/servers to show the proxy");
  t.deepEqual(proxy, { kind: "caddy", ok: true, detail: `caddy admin API at ${adminUrl} answers` });
  const out = await cli().run(["servers"]);
  t.is(out.code, 0, out.stderr);
  t.regex(out.stdout, /\bPROXY\b/);
  t.regex(out.stdout, /\bcaddy\b/);
  t.notRegex(out.stdout, /not answering/);
});

test.serial(
  "proxy - caddy killed: reported not answering, and a deploy fails at switch naming it; back when started",
  async (t) => {
    const adminUrl = s.caddy!.adminUrl;
    await s.caddy!.kill();
    const down = await proxyOf((p) => !p.ok, "GET /api/servers to say caddy is not answering");
    t.is(down.kind, "caddy");
    t.true(down.detail.startsWith(`caddy at ${adminUrl} is not answering: `), down.detail);
    t.regex(down.detail, /ECONNREFUSED/);
    const line = await agentLine(
      (m) => m.startsWith("reverse proxy: caddy at"),
      "the agent's proxy-down line",
    );
    t.is(String(line.json?.msg), `reverse proxy: ${down.detail} (deploys fail at switch until it is back)`);

    // `relayctl servers` shows it, with the reason under the table.
    const out = await cli().run(["servers"]);
    t.regex(out.stdout, /caddy \(not answering\)/);
    t.true(out.stdout.includes(down.detail), out.stdout);

    const d = await s.deployAndWait(app.id, { timeout_seconds: 300 }, 300_000);
    t.is(d.op.json.status, "failed", describe(d.op));
    const stderr = String((d.op.json.result as Record<string, unknown>).stderr);
    t.log(stderr); // the reason a person reads, shown in the run's output
    t.true(stderr.startsWith("switch: the caddy proxy did not take the route: "), stderr);
    t.true(stderr.includes(adminUrl), stderr);
    t.regex(stderr, /the route was not changed/);
    const v = await s.deployment(app.id, d.deploymentId);
    t.like(v.json, { status: "failed", failed_step: "switch" });

    await s.caddy!.start();
    const up = await proxyOf((p) => p.ok, "GET /api/servers to say caddy answers again");
    t.deepEqual(up, { kind: "caddy", ok: true, detail: `caddy admin API at ${adminUrl} answers` });
    await agentLine((m) => m === "reverse proxy: caddy answering again", "the agent's proxy-back line");
  },
);
