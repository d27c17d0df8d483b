// The agent restarts a crashed podman container when podman says it died, not at its next
// look: here the looks are a minute apart, and the killed app runs again well before
// (agent containers/died-events.ts). Real podman, agent, control plane and Caddy.
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { killApp } from "./harness/containers";
import { type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { createAppRepo } from "./harness/git-repo";
import { proxyGet } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

/** The agent's looks at its containers, apart: longer than any wait below. */
const WATCH_S = 60;

let s: DeployStack;
test.before(async () => {
  s = await startDeployStack({ agentEnv: { RELAYCTL_AGENT_CONTAINER_WATCH_SECONDS: String(WATCH_S) } });
});
test.after.always(cleanupAll);

test("restart on died event - a killed app runs again long before the agent's next look, and serves", async (t) => {
  const app = await s.createApp({}, await createAppRepo());
  const d = await s.deployAndWait(app.id);
  t.is(d.op.json.status, "completed", describe(d.op));
  const [name] = await s.containersOf(app.id);
  t.truthy(name);
  // Twice: the second death comes after the first restart, on the same follower.
  for (let i = 0; i < 2; i++) await killApp(name!, (WATCH_S / 3) * 1000);
  await pollUntil(async () => ((await proxyGet(s.proxyPort, app.fqdn)).status === 200 ? true : undefined), {
    timeoutMs: 30_000,
    what: "the app served through Caddy again",
  });
  // The agent's two restarts, counted in its report (podman's own count stays 0: no policy).
  const container = await pollUntil(
    async () => {
      const c = (await s.manage(`/applications/${app.id}`)).json.container as {
        state: string;
        restart_count: number;
      } | null;
      return c?.restart_count === 2 ? c : undefined;
    },
    { timeoutMs: 30_000, what: "two restarts reported" },
  );
  t.is(container.state, "running");
});
