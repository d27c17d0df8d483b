// RouteSyncer against a real Caddy (one per test) with a ledger file in a temp
// dir: the statuses the control plane reports come from what Caddy really holds.
import { randomUUID } from "node:crypto";
import { readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import test from "ava";
import { startCaddy } from "../../test/harness/caddy";
import { cleanupAll, makeTempDir } from "../../test/harness/cleanup";
import { proxyGet, startBackend, waitForBackend } from "../../test/harness/proxy-client";
import { CaddyWriter } from "./caddy-writer.js";
import { RouteLedger } from "./ledger.js";
import { type DesiredRoute, HEALTH_PATH } from "./route.js";
import { RouteSyncer } from "./route-syncer.js";

test.after.always(cleanupAll);

const WAIT_MS = 10_000;

async function setup() {
  const caddy = await startCaddy();
  const ledgerFile = join(makeTempDir("ledger"), "routes.json");
  const ledger = await RouteLedger.open(ledgerFile);
  const writerFor = (listen = `127.0.0.1:${caddy.httpPort}`) =>
    new CaddyWriter({ adminUrl: caddy.adminUrl, listen: [listen], automaticHttps: false });
  const writer = writerFor();
  const syncer = new RouteSyncer({ writer, ledger, upstreamMode: "host" });
  const deleteRoute = (id: string) => caddy.admin("DELETE", `/id/relayctl-app-${id}`);
  const config = async () => (await caddy.admin("GET", "/config/")).text;
  return { caddy, ledger, ledgerFile, writer, writerFor, syncer, deleteRoute, config, port: caddy.httpPort };
}

const desired = (fqdns: string[], port: number, over: Partial<DesiredRoute> = {}): DesiredRoute => ({
  applicationId: randomUUID(),
  containerName: "app-1",
  containerPort: port,
  imageTag: "app:1",
  fqdns,
  ...over,
});

const statuses = (report: { routes: { status: string }[] }) => report.routes.map((r) => r.status);

test("syncer - synced, then noop; the ledger file records what was applied", async (t) => {
  const { syncer, ledgerFile, port } = await setup();
  const one = await startBackend("one");
  const r = desired(["www.example.test", "example.test"], one.port);
  const first = await syncer.sync({ routes: [r] });
  t.deepEqual(first.routes, [
    {
      applicationId: r.applicationId,
      status: "synced",
      signatureHash: first.routes[0]!.signatureHash,
      fqdns: ["example.test", "www.example.test"],
      upstream: `127.0.0.1:${one.port}`,
    },
  ]);
  await waitForBackend(port, "www.example.test", "one", WAIT_MS);
  t.deepEqual(statuses(await syncer.sync({ routes: [r] })), ["noop"]);
  await syncer.settled(); // the save is off the answer's path (#record)
  const saved = (await RouteLedger.open(ledgerFile)).get(r.applicationId);
  t.is(saved?.signatureHash, first.routes[0]!.signatureHash);
  t.is(saved?.upstream, `127.0.0.1:${one.port}`);
});

test("syncer - a route lost, edited or wiped by a Caddy restart is drift_recovered", async (t) => {
  const { caddy, syncer, deleteRoute, port } = await setup();
  const one = await startBackend("one");
  const r = desired(["drift.example.test"], one.port);
  t.deepEqual(statuses(await syncer.sync({ routes: [r] })), ["synced"]);
  t.is((await deleteRoute(r.applicationId)).status, 200);
  t.is((await proxyGet(port, "drift.example.test")).status, 404);
  t.deepEqual(statuses(await syncer.sync({ routes: [r] })), ["drift_recovered"]);
  await waitForBackend(port, "drift.example.test", "one", WAIT_MS);
  const res = await caddy.admin("PATCH", `/id/relayctl-app-${r.applicationId}/terminal`, false);
  t.is(res.status, 200, res.text);
  t.deepEqual(statuses(await syncer.sync({ routes: [r] })), ["drift_recovered"], "not pristine");
  await caddy.restart();
  t.deepEqual(statuses(await syncer.sync({ routes: [r] })), ["drift_recovered"]);
  await waitForBackend(port, "drift.example.test", "one", WAIT_MS);
  t.deepEqual(statuses(await syncer.sync({ routes: [r] })), ["noop"]);
});

test("syncer - a changed port is synced and moves traffic; a bad FQDN fails and never reaches Caddy", async (t) => {
  const { syncer, config, port } = await setup();
  const [one, two] = [await startBackend("one"), await startBackend("two")];
  const r = desired(["move.example.test"], one.port);
  await syncer.sync({ routes: [r] });
  const bad = desired(["ok.example.test", "evil.example.test;"], one.port);
  const report = await syncer.sync({ routes: [{ ...r, containerPort: two.port }, bad] });
  t.deepEqual(statuses(report), ["synced", "failed"]);
  t.is(report.routes[1]!.error, "invalid domain name 'evil.example.test;'");
  await waitForBackend(port, "move.example.test", "two", WAIT_MS);
  const live = await config();
  t.false(live.includes(bad.applicationId));
  t.false(live.includes("ok.example.test"), "no part of a failed route is written");
});

test("syncer - knownApplicationIds prunes routes of applications that no longer exist", async (t) => {
  const { syncer, ledger, writer, port } = await setup();
  const one = await startBackend("one");
  const [a, b] = [desired(["a.example.test"], one.port), desired(["b.example.test"], one.port)];
  await syncer.sync({ routes: [a, b] });
  // A route only the proxy knows (its ledger entry was lost) is pruned too.
  const orphan = {
    applicationId: randomUUID(),
    fqdns: ["orphan.example.test"],
    upstream: `127.0.0.1:${one.port}`,
  };
  await writer.apply({ upsert: [orphan], remove: [] });
  await waitForBackend(port, "b.example.test", "one", WAIT_MS);
  const report = await syncer.sync({ routes: [a], knownApplicationIds: [a.applicationId] });
  t.deepEqual(statuses(report), ["noop"]);
  t.deepEqual(report.removed, [b.applicationId, orphan.applicationId].sort());
  t.is((await proxyGet(port, "b.example.test")).status, 404);
  t.is((await proxyGet(port, "orphan.example.test")).status, 404);
  t.deepEqual(ledger.ids(), [a.applicationId]);
  const explicit = await syncer.sync({ routes: [], remove: [a.applicationId] });
  t.deepEqual(explicit, { routes: [], removed: [a.applicationId] });
  t.deepEqual([...(await writer.readAll()).keys()], []);
});

test("syncer - a domain claimed by another application's route moves: the old route is removed", async (t) => {
  const { syncer, ledger, writer, port } = await setup();
  const [one, two] = [await startBackend("one"), await startBackend("two")];
  const old = desired(["shared.example.test", "old.example.test"], one.port);
  const other = desired(["other.example.test"], one.port);
  await syncer.sync({ routes: [old, other] });
  const fresh = desired(["shared.example.test"], two.port, { containerName: "app-2" });
  const report = await syncer.sync({ routes: [fresh] });
  t.deepEqual(statuses(report), ["synced"]);
  t.deepEqual(report.removed, [old.applicationId]);
  await waitForBackend(port, "shared.example.test", "two", WAIT_MS);
  t.deepEqual([...(await writer.readAll()).keys()].sort(), [other.applicationId, fresh.applicationId].sort());
  t.is(ledger.get(old.applicationId), undefined);
  const twice = await syncer.sync({
    routes: [desired(["dup.example.test"], 1), desired(["dup.example.test"], 2)],
  });
  t.deepEqual(statuses(twice), ["synced", "failed"], "two routes of one request never share a domain");
});

test("syncer - a change Caddy refuses fails the routes that needed writing; noops and the ledger stay", async (t) => {
  const { syncer, ledger, ledgerFile, writerFor } = await setup();
  const a = desired(["a.example.test"], 3000);
  await syncer.sync({ routes: [a] });
  const before = ledger.get(a.applicationId);
  // Same server and ledger, but a listen address Caddy refuses: every write fails.
  const broken = new RouteSyncer({ writer: writerFor("127.0.0.1:notaport"), ledger, upstreamMode: "host" });
  const b = desired(["b.example.test"], 3001);
  const report = await broken.sync({ routes: [a, b] });
  t.deepEqual(statuses(report), ["noop", "failed"]);
  t.regex(report.routes[1]!.error ?? "", /caddy refused PATCH .*notaport/);
  t.deepEqual(ledger.ids(), [a.applicationId]);
  t.deepEqual(ledger.get(a.applicationId), before);
  await Promise.all([syncer.settled(), broken.settled()]);
  const saved = await RouteLedger.open(ledgerFile);
  t.deepEqual(saved.ids(), [a.applicationId], "nor on disk");
  t.deepEqual(saved.get(a.applicationId), before);
});

test("syncer - a proxy that cannot be read fails every route with the reason", async (t) => {
  const { caddy, syncer } = await setup();
  await caddy.stop();
  const report = await syncer.sync({ routes: [desired(["a.example.test"], 3000), desired(["bad"], 3000)] });
  t.deepEqual(statuses(report), ["failed", "failed"]);
  t.regex(report.routes[0]!.error ?? "", /could not read the caddy proxy: .*unreachable/);
  t.is(report.routes[1]!.error, "invalid domain name 'bad'");
});

test("syncer - concurrent sync calls run one at a time and none loses another's route", async (t) => {
  const { syncer, writer, ledgerFile, port } = await setup();
  const one = await startBackend("one");
  const routes = Array.from({ length: 6 }, (_, i) => desired([`c${i}.example.test`], one.port));
  const reports = await Promise.all(routes.map((r) => syncer.sync({ routes: [r] })));
  t.deepEqual(
    reports.flatMap(statuses),
    routes.map(() => "synced"),
  );
  const live = await writer.readAll();
  t.deepEqual([...live.keys()].sort(), routes.map((r) => r.applicationId).sort());
  for (const r of routes) await waitForBackend(port, r.fqdns[0]!, "one", WAIT_MS);
  await syncer.settled();
  t.is((await RouteLedger.open(ledgerFile)).ids().length, routes.length);
});

/** A real CaddyWriter that counts its reads: the test sees when the syncer read the proxy. */
class CountingWriter extends CaddyWriter {
  reads = 0;
  override async readAll() {
    const live = await super.readAll();
    this.reads++;
    return live;
  }
}

async function until(what: string, done: () => boolean): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test("syncer - a request still in the making: the proxy is read meanwhile, written only once it comes, after the turn before", async (t) => {
  const { caddy, ledger, writer: first } = await setup();
  const writer = new CountingWriter({
    adminUrl: caddy.adminUrl,
    listen: [`127.0.0.1:${caddy.httpPort}`],
    automaticHttps: false,
  });
  const syncer = new RouteSyncer({ writer, ledger, upstreamMode: "host" });
  const a = desired(["a.example.test"], 3000);
  const b = desired(["b.example.test"], 3001);
  let give!: (req: { routes: DesiredRoute[] }) => void;
  const requestA = new Promise<{ routes: DesiredRoute[] }>((resolve) => {
    give = resolve;
  });
  const pendingA = syncer.sync(requestA);
  // Queued behind a: its read must see a's write, or its write would drop a's route.
  const plainB = syncer.sync({ routes: [b] });
  await until("the read beside the pending request", () => writer.reads === 1);
  t.is((await first.readAll()).size, 0, "nothing is written before the request is there");
  t.deepEqual(ledger.ids(), []);
  give({ routes: [a] });
  t.deepEqual(statuses(await pendingA), ["synced"]);
  t.deepEqual(statuses(await plainB), ["synced"]);
  t.deepEqual([...(await first.readAll()).keys()].sort(), [a.applicationId, b.applicationId].sort());
  t.is(writer.reads, 1, "b's turn wrote on the server as a's write left it (conditionally), unread");
});

test("syncer - a request that fails in the making writes nothing, and the next turn writes on what the proxy holds", async (t) => {
  const { caddy, ledger, writer: first } = await setup();
  const writer = new CountingWriter({
    adminUrl: caddy.adminUrl,
    listen: [`127.0.0.1:${caddy.httpPort}`],
    automaticHttps: false,
  });
  const syncer = new RouteSyncer({ writer, ledger, upstreamMode: "host" });
  const a = desired(["a.example.test"], 3000);
  await syncer.sync({ routes: [a] });
  const failing = syncer.sync(Promise.reject(new Error("the engine did not answer")));
  await t.throwsAsync(failing, { message: "the engine did not answer" });
  t.deepEqual([...(await first.readAll()).keys()], [a.applicationId]);
  const b = desired(["b.example.test"], 3001);
  t.deepEqual(statuses(await syncer.sync({ routes: [b] })), ["synced"]);
  t.deepEqual([...(await first.readAll()).keys()].sort(), [a.applicationId, b.applicationId].sort());
  t.is(writer.reads, 1, "only the first turn read: the others wrote on the writer's view, conditionally");
});

test("syncer - a sync that writes reads nothing; a route someone else added to the server meanwhile is kept", async (t) => {
  const { caddy, ledger, port } = await setup();
  const writer = new CountingWriter({
    adminUrl: caddy.adminUrl,
    listen: [`127.0.0.1:${caddy.httpPort}`],
    automaticHttps: false,
  });
  const syncer = new RouteSyncer({ writer, ledger, upstreamMode: "host" });
  const [one, two] = [await startBackend("one"), await startBackend("two")];
  const r = desired(["kept.example.test"], one.port);
  t.deepEqual(statuses(await syncer.sync({ routes: [r] })), ["synced"]);
  t.deepEqual(statuses(await syncer.sync({ routes: [{ ...r, containerPort: two.port }] })), ["synced"]);
  await waitForBackend(port, "kept.example.test", "two", WAIT_MS);
  t.is(writer.reads, 1, "the second write went on the ETag of the first, made here");
  // Someone else's route on our server, with what Go's JSON escapes or formats its own way.
  const foreign = {
    match: [{ host: ["ops.internal.test"] }],
    handle: [
      {
        handler: "static_response",
        body: '<ops> & \u00e9t\u00e9 \u2028 \b\f\u0001 \\b \ud800 "q" \u{1f600}',
        status_code: 202,
      },
    ],
  };
  const res = await caddy.admin("POST", "/config/apps/http/servers/relayctl/routes/...", [foreign]);
  t.is(res.status, 200, res.text);
  t.deepEqual(statuses(await syncer.sync({ routes: [{ ...r, containerPort: one.port }] })), ["synced"]);
  t.is(writer.reads, 2, "refused on the stale view (412): read, planned and written again");
  await waitForBackend(port, "kept.example.test", "one", WAIT_MS);
  t.like(await proxyGet(port, "ops.internal.test"), { status: 202 });
  t.deepEqual(statuses(await syncer.sync({ routes: [{ ...r, containerPort: two.port }] })), ["synced"]);
  t.is(writer.reads, 2, "the server with the foreign route hashes as Caddy hashes it");
  await waitForBackend(port, "kept.example.test", "two", WAIT_MS);
  t.like(await proxyGet(port, "ops.internal.test"), { status: 202 });
});

test("syncer - container-network upstream: Caddy dials <container_name>:<port>, and switching modes is a new signature", async (t) => {
  const { ledger, writer, config } = await setup();
  const networked = new RouteSyncer({ writer, ledger, upstreamMode: "container-network" });
  const r = desired(["net.example.test"], 3000, { containerName: "shop-web_1" });
  const report = await networked.sync({ routes: [r] });
  t.deepEqual(statuses(report), ["synced"]);
  t.is(report.routes[0]!.upstream, "shop-web_1:3000");
  const live = JSON.parse(await config());
  const route = live.apps.http.servers.relayctl.routes.find(
    (x: { "@id": string }) => x["@id"] === `relayctl-app-${r.applicationId}`,
  );
  t.deepEqual(route.handle[0].upstreams, [{ dial: "shop-web_1:3000" }]);
  const onHost = new RouteSyncer({ writer, ledger, upstreamMode: "host" });
  const moved = await onHost.sync({ routes: [r] });
  t.deepEqual(statuses(moved), ["synced"]);
  t.not(moved.routes[0]!.signatureHash, report.routes[0]!.signatureHash);
});

test("syncer - drain marks the health path 503 in the ledger, a later sync of the route keeps it, undrain ends it", async (t) => {
  const { syncer, ledgerFile, port } = await setup();
  const [one, two] = [await startBackend("one"), await startBackend("two")];
  const r = desired(["shop.example.test"], one.port);
  await syncer.sync({ routes: [r] });
  await waitForBackend(port, "shop.example.test", "one", WAIT_MS);
  const health = () => proxyGet(port, "shop.example.test", HEALTH_PATH);
  t.is((await health()).status, 200);
  const drained = await syncer.sync({ routes: [], drain: [r.applicationId, randomUUID()] });
  t.deepEqual(statuses(drained), ["synced"], "only the application this server has a route for");
  t.deepEqual(await health(), { status: 503, body: "draining\n" });
  t.true((await RouteLedger.open(ledgerFile)).get(r.applicationId)?.draining);
  // A deployment's switch: a new upstream, still draining until told otherwise.
  await syncer.sync({ routes: [{ ...r, containerPort: two.port, imageTag: "app:2" }] });
  await waitForBackend(port, "shop.example.test", "two", WAIT_MS);
  t.is((await health()).status, 503);
  t.deepEqual(statuses(await syncer.sync({ routes: [], undrain: [r.applicationId] })), ["synced"]);
  t.deepEqual(await health(), { status: 200, body: "live\n" });
  t.is((await RouteLedger.open(ledgerFile)).get(r.applicationId)?.draining, undefined);
  t.is((await proxyGet(port, "shop.example.test")).body, "backend two");
});

test("syncer - the ledger is saved after the answer, never ahead of Caddy; a restart on a file a save behind keeps the newer port; drains are saved first", async (t) => {
  const { caddy, syncer, ledgerFile, port } = await setup();
  const [one, two] = [await startBackend("one"), await startBackend("two")];
  const r = desired(["crash.example.test"], one.port);
  await syncer.sync({ routes: [r] });
  await syncer.settled();
  const behind = await readFile(ledgerFile, "utf8"); // the file as a crash right after the next apply leaves it
  await syncer.sync({ routes: [{ ...r, containerPort: two.port, imageTag: "app:2" }] });
  await waitForBackend(port, "crash.example.test", "two", WAIT_MS);
  await syncer.settled();
  t.is((await RouteLedger.open(ledgerFile)).get(r.applicationId)?.upstream, `127.0.0.1:${two.port}`);
  // The agent restarts on the file a save behind (upstream one) while Caddy serves two.
  const restartedFile = join(makeTempDir("ledger"), "routes.json");
  await writeFile(restartedFile, behind);
  const restarted = new RouteSyncer({
    writer: new CaddyWriter({
      adminUrl: caddy.adminUrl,
      listen: [`127.0.0.1:${port}`],
      automaticHttps: false,
    }),
    ledger: await RouteLedger.open(restartedFile),
    upstreamMode: "host",
  });
  t.is((await RouteLedger.open(restartedFile)).get(r.applicationId)?.upstream, `127.0.0.1:${one.port}`);
  t.deepEqual(statuses(await restarted.sync({ routes: [], drain: [r.applicationId] })), ["synced"]);
  // Saved before the answer: read at once, no settled().
  t.true((await RouteLedger.open(restartedFile)).get(r.applicationId)?.draining);
  t.deepEqual(await proxyGet(port, "crash.example.test", HEALTH_PATH), { status: 503, body: "draining\n" });
  t.is(
    (await proxyGet(port, "crash.example.test")).body,
    "backend two",
    "the drain kept the port Caddy served",
  );
});

test("syncer - a write after Caddy restarted without its config puts the server back (its view is gone with it)", async (t) => {
  const { caddy, syncer, port } = await setup();
  const [one, two] = [await startBackend("one"), await startBackend("two")];
  const r = desired(["back.example.test"], one.port);
  t.deepEqual(statuses(await syncer.sync({ routes: [r] })), ["synced"]);
  await caddy.restart();
  t.deepEqual(statuses(await syncer.sync({ routes: [{ ...r, containerPort: two.port }] })), ["synced"]);
  await waitForBackend(port, "back.example.test", "two", WAIT_MS);
});

test("syncer - a ledger save that fails after the answer fails the next sync, loudly", async (t) => {
  const { syncer, ledgerFile } = await setup();
  const a = desired(["a.example.test"], 3000);
  t.deepEqual(statuses(await syncer.sync({ routes: [a] })), ["synced"]);
  await syncer.settled();
  // The ledger's directory replaced by a file: no save can succeed.
  const dir = dirname(ledgerFile);
  await rm(dir, { recursive: true });
  await writeFile(dir, "not a directory");
  // Caddy took it (a failed write saves nothing): the save after the answer is what fails.
  t.deepEqual(statuses(await syncer.sync({ routes: [{ ...a, containerPort: 3001 }] })), ["synced"]);
  await t.throwsAsync(syncer.settled());
  await t.throwsAsync(syncer.sync({ routes: [{ ...a, containerPort: 3002 }] }));
});
