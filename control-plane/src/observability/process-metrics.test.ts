import { once } from "node:events";
import { readdirSync } from "node:fs";
import { type Socket, connect, createServer } from "node:net";
import test from "ava";
import { Registry, collectDefaultMetrics } from "prom-client";
import { collectProcessMetrics } from "./process-metrics.js";
import { listenOnFreePort } from "@relayctl/devkit";

/** The value of the series `name` (labels included in the name) in a text scrape. */
function seriesValue(text: string, name: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no series ${name} in the scrape`);
  return Number(line.slice(name.length + 1));
}

/** Sums every `name{type="…"}` series. */
function sumByType(text: string, name: string): number {
  return text
    .split("\n")
    .filter((l) => l.startsWith(`${name}{type=`))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
}

test.serial("process metrics - open fds, handles and resources follow the connections", async (t) => {
  const registry = new Registry();
  collectProcessMetrics(registry, "t_");
  const before = await registry.metrics();

  const accepted: Socket[] = [];
  const listener = createServer((s) => accepted.push(s));
  const port = await listenOnFreePort(listener);
  const sockets: Socket[] = [];
  for (let i = 0; i < 100; i++) {
    const s = connect(port, "127.0.0.1");
    sockets.push(s);
    await once(s, "connect");
  }
  while (accepted.length < 100) await new Promise((r) => setImmediate(r));
  t.teardown(() => {
    for (const s of [...sockets, ...accepted]) s.destroy();
    listener.close();
  });

  const after = await registry.metrics();
  // 100 client sockets and the 100 the listener accepted: 200 descriptors more.
  t.true(seriesValue(after, "t_process_open_fds") >= seriesValue(before, "t_process_open_fds") + 200);
  // The count is the kernel's, as a listing of the directory gives it (minus the listing's own),
  // compared at a moment when nothing else in this worker opened or closed a descriptor around it.
  const listed = () => readdirSync("/proc/self/fd").length - 1;
  let compared = false;
  for (let i = 0; i < 20 && !compared; i++) {
    const fds = listed();
    const scraped = seriesValue(await registry.metrics(), "t_process_open_fds");
    if (listed() !== fds) continue;
    t.is(scraped, fds);
    compared = true;
  }
  t.true(compared, "the worker's descriptors never held still through a scrape");
  for (const list of ["t_nodejs_active_handles", "t_nodejs_active_resources"]) {
    t.true(seriesValue(after, `${list}_total`) >= seriesValue(before, `${list}_total`) + 100, list);
  }
  // The series by type and the total come from one listing: they add up.
  t.is(sumByType(after, "t_nodejs_active_handles"), seriesValue(after, "t_nodejs_active_handles_total"));
  // The client sockets and the accepted ones are all `Socket` handles.
  const socketHandles = (text: string) =>
    text.includes('t_nodejs_active_handles{type="Socket"}')
      ? seriesValue(text, 't_nodejs_active_handles{type="Socket"}')
      : 0;
  t.true(socketHandles(after) >= socketHandles(before) + 200);
});

test("process metrics - the same series, help texts and types as prom-client's defaults", async (t) => {
  const ours = new Registry();
  collectProcessMetrics(ours, "t_");
  const theirs = new Registry();
  collectDefaultMetrics({ register: theirs, prefix: "t_" });
  const header = async (r: Registry) =>
    (await r.metrics())
      .split("\n")
      .filter((l) => l.startsWith("# "))
      .sort();
  t.deepEqual(await header(ours), await header(theirs));
});
