// CaddyWriter against a real Caddy 2.6 started per test (its admin API on a
// free port); traffic goes through Caddy with `Host: <fqdn>` to real backends.
import { randomUUID } from "node:crypto";
import test from "ava";
import { startCaddy } from "../../test/harness/caddy";
import { cleanupAll } from "../../test/harness/cleanup";
import { freePort } from "../../test/harness/ports";
import { proxyGet, startBackend, waitForBackend } from "../../test/harness/proxy-client";
import { CaddyWriter, caddyRouteJson } from "./caddy-writer.js";
import { HEALTH_PATH } from "./route.js";
import { ProxyChangedError } from "./route-writer.js";

test.after.always(cleanupAll);

const WAIT_MS = 10_000;

async function setup() {
  const caddy = await startCaddy();
  const writer = new CaddyWriter({
    adminUrl: caddy.adminUrl,
    listen: [`127.0.0.1:${caddy.httpPort}`],
    automaticHttps: false,
  });
  const server = async () => {
    const res = await caddy.admin("GET", "/config/apps/http/servers/relayctl");
    return res.json as { routes: Record<string, unknown>[]; automatic_https?: unknown };
  };
  return { caddy, writer, server, port: caddy.httpPort };
}

const route = (fqdns: string[], port: number, applicationId = randomUUID()) => ({
  applicationId,
  fqdns: [...fqdns].sort(),
  upstream: `127.0.0.1:${port}`,
});

test("caddy - apply on a Caddy with only its admin config creates the server and routes traffic", async (t) => {
  const { writer, server, port } = await setup();
  const one = await startBackend("one");
  const r = route(["shop.example.test", "*.shop.example.test"], one.port);
  await writer.apply({ upsert: [r], remove: [] });
  await waitForBackend(port, "shop.example.test", "one", WAIT_MS);
  await waitForBackend(port, "eu.shop.example.test", "one", WAIT_MS);
  const other = await proxyGet(port, "unknown.example.test");
  t.deepEqual(other, { status: 404, body: "no route for this host\n" });
  const s = await server();
  t.deepEqual(s.automatic_https, { disable: true });
  t.is(s.routes.at(-1)?.["@id"], "relayctl-catchall", "the catch-all is last");
  t.deepEqual(await writer.readAll(), new Map([[r.applicationId, { ...r, pristine: true }]]));
});

test("caddy - a changed upstream port moves traffic, removal gives 404 and keeps other routes", async (t) => {
  const { writer, port } = await setup();
  const [one, two] = [await startBackend("one"), await startBackend("two")];
  const a = route(["a.example.test"], one.port);
  const b = route(["b.example.test"], one.port);
  await writer.apply({ upsert: [a, b], remove: [] });
  await waitForBackend(port, "a.example.test", "one", WAIT_MS);
  await writer.apply({ upsert: [{ ...a, upstream: `127.0.0.1:${two.port}` }], remove: [] });
  await waitForBackend(port, "a.example.test", "two", WAIT_MS);
  t.is((await proxyGet(port, "b.example.test")).body, "backend one");
  await writer.apply({ upsert: [], remove: [a.applicationId, randomUUID()] });
  t.is((await proxyGet(port, "a.example.test")).status, 404);
  t.is((await proxyGet(port, "b.example.test")).body, "backend one");
  t.deepEqual([...(await writer.readAll()).keys()], [b.applicationId]);
});

test("caddy - routes it does not own are kept before the catch-all, exact hosts before wildcards; a write on a stale view is refused", async (t) => {
  const { caddy, writer, server, port } = await setup();
  const one = await startBackend("one");
  const two = await startBackend("two");
  const wild = route(["*.example.test"], one.port);
  const exact = route(["www.example.test"], two.port);
  await writer.apply({ upsert: [wild], remove: [] });
  const foreign = {
    match: [{ host: ["ops.internal.test"] }],
    handle: [{ handler: "static_response", body: "ops" }],
  };
  const res = await caddy.admin("PUT", "/config/apps/http/servers/relayctl/routes/0", foreign);
  t.is(res.status, 200, res.text);
  // Written on its view of the server, which no longer holds: Caddy refuses it whole (If-Match).
  await t.throwsAsync(writer.apply({ upsert: [exact], remove: [] }), { instanceOf: ProxyChangedError });
  t.deepEqual(
    (await server()).routes.map((r) => r["@id"] ?? "foreign"),
    [
      "foreign",
      `relayctl-health-${wild.applicationId}`,
      `relayctl-app-${wild.applicationId}`,
      "relayctl-catchall",
    ],
    "nothing was written",
  );
  await writer.readAll();
  await writer.apply({ upsert: [exact], remove: [] });
  const ids = (await server()).routes.map((r) => r["@id"] ?? "foreign");
  t.deepEqual(ids, [
    `relayctl-health-${exact.applicationId}`,
    `relayctl-health-${wild.applicationId}`,
    `relayctl-app-${exact.applicationId}`,
    `relayctl-app-${wild.applicationId}`,
    "foreign",
    "relayctl-catchall",
  ]);
  await waitForBackend(port, "www.example.test", "two", WAIT_MS);
  await waitForBackend(port, "api.example.test", "one", WAIT_MS);
  t.is((await proxyGet(port, "ops.internal.test")).body, "ops");
  t.is((await writer.readAll()).size, 2, "a foreign route is not reported as ours");
});

test("caddy - after a restart readAll is empty and apply restores the routes", async (t) => {
  const { caddy, writer, port } = await setup();
  const one = await startBackend("one");
  const r = route(["restart.example.test"], one.port);
  await writer.apply({ upsert: [r], remove: [] });
  await waitForBackend(port, "restart.example.test", "one", WAIT_MS);
  await caddy.restart();
  t.is((await writer.readAll()).size, 0);
  await writer.apply({ upsert: [r], remove: [] });
  await waitForBackend(port, "restart.example.test", "one", WAIT_MS);
  t.true((await writer.readAll()).get(r.applicationId)?.pristine);
});

test("caddy - a route edited behind the writer's back is read as not pristine", async (t) => {
  const { caddy, writer } = await setup();
  const r = route(["edit.example.test"], await freePort());
  await writer.apply({ upsert: [r], remove: [] });
  const edited = { ...caddyRouteJson(r), terminal: false };
  const res = await caddy.admin("PATCH", `/id/relayctl-app-${r.applicationId}`, edited);
  t.is(res.status, 200, res.text);
  const live = (await writer.readAll()).get(r.applicationId);
  t.deepEqual(live, { ...r, pristine: false }, "same domains and upstream, but not what we wrote");
});

test("caddy - a refused config carries Caddy's message and leaves the running config alone", async (t) => {
  const { caddy, writer, port } = await setup();
  const one = await startBackend("one");
  await writer.apply({ upsert: [route(["keep.example.test"], one.port)], remove: [] });
  const bad = new CaddyWriter({
    adminUrl: caddy.adminUrl,
    listen: ["127.0.0.1:notaport"],
    automaticHttps: false,
  });
  const err = await t.throwsAsync(bad.apply({ upsert: [route(["x.example.test"], one.port)], remove: [] }));
  t.regex(err?.message ?? "", /caddy refused PATCH .*notaport/);
  await waitForBackend(port, "keep.example.test", "one", WAIT_MS);
  t.is((await writer.readAll()).size, 1);
});

test("caddy - an unreachable admin API is an error that says so", async (t) => {
  const writer = new CaddyWriter({ adminUrl: `http://127.0.0.1:${await freePort()}`, automaticHttps: false });
  const err = await t.throwsAsync(writer.readAll());
  t.regex(err?.message ?? "", /caddy admin API .* unreachable: .*ECONNREFUSED/);
});

test("caddy - a route with a bad domain never reaches Caddy", async (t) => {
  const { caddy, writer } = await setup();
  const err = await t.throwsAsync(writer.apply({ upsert: [route(["bad;.example.test"], 80)], remove: [] }));
  t.regex(err?.message ?? "", /invalid domain name/);
  t.false((await caddy.admin("GET", "/config/")).text.includes("bad;"));
});

test("caddy - the health path is answered by Caddy: 200 live, 503 draining, the app's own paths untouched", async (t) => {
  const { writer, server, port } = await setup();
  const one = await startBackend("one");
  const r = route(["shop.example.test"], one.port);
  await writer.apply({ upsert: [r], remove: [] });
  await waitForBackend(port, "shop.example.test", "one", WAIT_MS);
  t.deepEqual(await proxyGet(port, "shop.example.test", HEALTH_PATH), { status: 200, body: "live\n" });
  t.is((await proxyGet(port, "shop.example.test", "/.well-known/relayctl/healthz")).body, "backend one");
  t.deepEqual((await writer.readAll()).get(r.applicationId), { ...r, pristine: true });
  await writer.apply({ upsert: [{ ...r, draining: true }], remove: [] });
  t.deepEqual(await proxyGet(port, "shop.example.test", HEALTH_PATH), { status: 503, body: "draining\n" });
  t.is((await proxyGet(port, "shop.example.test")).body, "backend one", "traffic still flows while draining");
  t.deepEqual((await writer.readAll()).get(r.applicationId), { ...r, draining: true, pristine: true });
  const ids = (await server()).routes.map((x) => x["@id"]);
  t.deepEqual(ids, [
    `relayctl-health-${r.applicationId}`,
    `relayctl-app-${r.applicationId}`,
    "relayctl-catchall",
  ]);
  await writer.apply({ upsert: [], remove: [r.applicationId] });
  t.is((await proxyGet(port, "shop.example.test", HEALTH_PATH)).status, 404, "no route: the catch-all");
  t.deepEqual(
    (await server()).routes.map((x) => x["@id"]),
    ["relayctl-catchall"],
  );
});
