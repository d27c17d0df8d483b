// External deploy with RELAYCTL_APPS_URL set: each synced route carries its application's default
// hostname, and not one another application of the server binds (a clash older rows left: the
// write API refuses to make one). The sync reads those hostnames for all its entries at once
// (hosts.ts defaultHostsOf): the same rules as one application's read, per pair of server and host.
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type WebContainer, podmanAgentEnv, startWebContainer } from "./harness/containers";
import { type RouteStack, startRouteStack } from "./harness/route-stack";

const sfx = Math.random().toString(36).slice(2, 8);
let s: RouteStack;
let box: WebContainer;

test.before(async () => {
  s = await startRouteStack({
    proxy: "caddy",
    agentEnv: podmanAgentEnv,
    serverEnv: { RELAYCTL_APPS_URL: "http://{app}.apps.test" },
  });
  box = await startWebContainer("au", ["one"]);
});
test.after.always(cleanupAll);

test("apps url - a sync's routes carry each default hostname, except one another application binds", async (t) => {
  const alpha = await s.createApplication({
    name: `alpha-${sfx}`,
    linked_container_name: box.name,
    container_port: box.hostPort("one"),
    fqdns: [`a-${sfx}.example.test`],
  });
  const bravo = await s.createApplication({
    name: `bravo-${sfx}`,
    linked_container_name: box.name,
    container_port: box.hostPort("one"),
    fqdns: [`b-${sfx}.example.test`],
  });
  // Alpha binds bravo's default hostname, as rows from before the template could (the API refuses it).
  const taken = `bravo-${sfx}.apps.test`;
  await s.c.db.query("UPDATE applications SET fqdns = ? WHERE id = ?", [
    JSON.stringify([`a-${sfx}.example.test`, taken]),
    alpha.id,
  ]);
  await s.c.db.query("INSERT INTO application_fqdns (server_id, fqdn, application_id) VALUES (?, ?, ?)", [
    s.c.serverId,
    taken,
    alpha.id,
  ]);
  const session = await s.openSession({ container_names: [box.name] });
  t.is(session.status, 201, describe(session));
  const res = await s.sync(String(session.json.session_token), [
    { container_name: box.name, container_port: box.hostPort("one"), image_tag: "r.test/au:1", force: true },
  ]);
  t.is(res.status, 200, describe(res));
  const fqdnsOf = new Map(
    (res.json.results as { application_id: string; status: string; synced_fqdns: string[] }[]).map((r) => [
      r.application_id,
      r.synced_fqdns,
    ]),
  );
  t.deepEqual(res.json.errors, [], describe(res));
  t.deepEqual(fqdnsOf.get(alpha.id), [`a-${sfx}.example.test`, `alpha-${sfx}.apps.test`, taken]);
  t.deepEqual(fqdnsOf.get(bravo.id), [`b-${sfx}.example.test`]);
});
