// External deploy through a real nginx: the agent writes one file per
// application, checks it with `nginx -t` and reloads. Traffic is checked through
// nginx with `Host: <fqdn>` to a real podman container (the agent checks with the
// engine that it publishes the port); drift is a file removed or edited behind
// the agent.
import { readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type WebContainer, podmanAgentEnv, startWebContainer } from "./harness/containers";
import { proxyGet, waitForBackend } from "./harness/proxy-client";
import { type RouteStack, startRouteStack } from "./harness/route-stack";
import { pollUntil } from "./harness/wait";

let s: RouteStack;
let shop: WebContainer;
let app: { id: string };
let token: string;

test.before(async () => {
  s = await startRouteStack({ proxy: "nginx", agentEnv: podmanAgentEnv });
  shop = await startWebContainer("shop-1", ["one", "two"]);
  app = await s.createApplication({
    name: "shop",
    linked_container_name: shop.name,
    container_port: 3000,
    fqdns: ["shop.example.test", "*.shop.example.test"],
  });
  const res = await s.openSession({ container_names: [shop.name] });
  if (res.status !== 201) throw new Error(describe(res));
  token = String(res.json.session_token);
});
test.after.always(cleanupAll);

const sync = async (port: number) => {
  const res = await s.sync(token, [{ container_name: shop.name, container_port: port, image_tag: "shop:7" }]);
  if (res.status !== 200) throw new Error(describe(res));
  const results = res.json.results as { status: string }[];
  return results[0]?.status ?? `errors: ${JSON.stringify(res.json.errors)}`;
};
const confFile = () => join(s.nginx!.confDir, `relayctl-${app.id}.conf`);

test.serial(
  "nginx - synced: a file per application, nginx reloaded, traffic reaches the container port",
  async (t) => {
    t.is(await sync(shop.hostPort("one")), "synced");
    await waitForBackend(s.proxyPort, "shop.example.test", "one", 10_000);
    await waitForBackend(s.proxyPort, "eu.shop.example.test", "one", 10_000);
    t.true(readdirSync(s.nginx!.confDir).includes(`relayctl-${app.id}.conf`));
  },
);

test.serial("nginx - a changed port moves traffic; the same request again is a noop", async (t) => {
  t.is(await sync(shop.hostPort("two")), "synced");
  await waitForBackend(s.proxyPort, "shop.example.test", "two", 10_000);
  t.is(await sync(shop.hostPort("two")), "noop");
});

test.serial("nginx - a file removed or edited behind the agent's back is drift_recovered", async (t) => {
  rmSync(confFile());
  t.is(await sync(shop.hostPort("two")), "drift_recovered");
  t.true(readFileSync(confFile(), "utf8").includes("shop.example.test"));
  writeFileSync(
    confFile(),
    readFileSync(confFile(), "utf8").replace(/proxy_pass [^;]+;/, "proxy_pass http://127.0.0.1:1;"),
  );
  t.is(await sync(shop.hostPort("two")), "drift_recovered");
  t.regex(readFileSync(confFile(), "utf8"), new RegExp(`127\\.0\\.0\\.1:${shop.hostPort("two")}`));
  await waitForBackend(s.proxyPort, "shop.example.test", "two", 10_000);
});

test.serial("nginx - deleting the application removes its file and its route", async (t) => {
  const del = await s.manage(`/applications/${app.id}`, { method: "DELETE" });
  t.is(del.status, 204, describe(del));
  t.false(readdirSync(s.nginx!.confDir).some((f) => f.includes(app.id)));
  const after = await pollUntil(
    async () => {
      const res = await proxyGet(s.proxyPort, "shop.example.test");
      return res.status === 404 ? res : undefined;
    },
    { what: "nginx to stop routing the deleted application", timeoutMs: 10_000 },
  );
  t.is(after.status, 404);
});
