// What the external-deploy tests through a real Caddy share (external-deploy.test.ts,
// external-deploy-refusals.test.ts): a route stack whose agent checks with podman that a
// container serves the port before it writes a route, and the calls a CI job makes (a session
// for its containers, a sync entry per container). The stack is this module's, one per test
// file: startExternalDeployStack() sets `s` in the file's test.before.
import { describe } from "./assertions";
import { podmanAgentEnv } from "./containers";
import { type RouteStack, startRouteStack } from "./route-stack";

export let s: RouteStack;

export async function startExternalDeployStack(): Promise<void> {
  s = await startRouteStack({ proxy: "caddy", agentEnv: podmanAgentEnv });
}

export const caddyConfig = async () => (await s.caddy!.admin("GET", "/config/")).text;

export async function session(names: string[], extra: Record<string, unknown> = {}) {
  const res = await s.openSession({ container_names: names, ...extra });
  if (res.status !== 201) throw new Error(`session: ${describe(res)}`);
  return { id: String(res.json.session_id), token: String(res.json.session_token), res };
}

export const entry = (container: string, port: number, extra: Record<string, unknown> = {}) => ({
  container_name: container,
  container_port: port,
  image_tag: "registry.example.test/web:1.0.0",
  ...extra,
});
