// The agent starts a route sync's reads (its port check and its read of the proxy)
// while the job's durable claim is still being written (agent/src/jobs/dispatcher.ts),
// and writes to the proxy only once the claim is durable: with a real Caddy and a
// real podman container, a sync whose claim failed writes nothing and fails, and
// the same sync with its claim made routes to the container.
import test from "ava";
import { RouteSyncRunner } from "../agent/src/jobs/route-sync";
import { startCaddy } from "./harness/caddy";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { podmanAgentEnv, startWebContainer } from "./harness/containers";
import { proxyGet, waitForBackend } from "./harness/proxy-client";

test.after.always(cleanupAll);

test("claim - nothing reaches Caddy before the job's claim is durable, nor after it failed", async (t) => {
  // The port check's engine CLI inherits the test's containers.conf.
  Object.assign(process.env, podmanAgentEnv);
  const caddy = await startCaddy();
  t.teardown(() => caddy.stop());
  const web = await startWebContainer("claim", ["one"]);
  const runner = new RouteSyncRunner(
    {
      kind: "caddy",
      upstream: "host",
      adminUrl: caddy.adminUrl,
      serverName: "relayctl",
      listen: [`127.0.0.1:${caddy.httpPort}`],
      automaticHttps: false,
    },
    makeTempDir("agent-state"),
    "podman",
  );
  const job = {
    routes: [
      {
        applicationId: "8f1d4c2a-1b3e-4f5a-9c7d-0e2f4a6b8c1d",
        containerName: web.name,
        containerPort: web.containerPort("one"),
        imageTag: "app:1",
        fqdns: ["claim.example.test"],
      },
    ],
    knownApplicationIds: ["8f1d4c2a-1b3e-4f5a-9c7d-0e2f4a6b8c1d"],
    removeApplicationIds: [],
    deadlineSeconds: 30,
    drainApplicationIds: [],
    undrainApplicationIds: [],
  };
  const refused = Promise.reject(new Error("journal write failed"));
  await t.throwsAsync(runner.run("11111111-2222-4333-8444-555555555555", job, refused), {
    message: /journal write failed/,
  });
  const config = await caddy.admin("GET", "/config/");
  t.is(config.status, 200);
  t.false(config.text.includes("claim.example.test"), "nothing was written");

  const result = await runner.run("11111111-2222-4333-8444-666666666666", job, Promise.resolve());
  t.is(result.detail?.$case === "routeSync" ? result.detail.routeSync.routes[0]?.error : "no report", "");
  await waitForBackend(caddy.httpPort, "claim.example.test", "one", 10_000);
  t.is((await proxyGet(caddy.httpPort, "claim.example.test")).body, "backend one");
});
