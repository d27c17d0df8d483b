// A TCP link that delays every chunk by a fixed time in each direction: the database as
// a network away (BENCH_DB_DELAY_MS of exec-throughput), where this machine has no
// netem qdisc to do it in the kernel. Order is kept per direction; the link's own CPU
// is its process's, read apart from the loads' (cpu_ms_per_operation leaves it out).
//
// As a library: startDelayLink(group, targetUrl, delayMs) → { url, pid }, the URL with the
// link's port. As a process: node delay-link.mjs '<json {host, port, delayMs}>'.
import { createServer, connect } from "node:net";
import { fileURLToPath } from "node:url";

const SELF = fileURLToPath(import.meta.url);

/** Writes each chunk to `to` delayMs after it arrived, in arrival order. */
function delayed(from, to, delayMs) {
  const queue = [];
  let scheduled = false;
  const flush = () => {
    const now = performance.now();
    while (queue.length > 0 && queue[0].due <= now + 0.05) to.write(queue.shift().chunk);
    scheduled = queue.length > 0;
    if (scheduled) setTimeout(flush, Math.max(0, queue[0].due - now));
  };
  from.on("data", (chunk) => {
    queue.push({ chunk, due: performance.now() + delayMs });
    if (scheduled) return;
    scheduled = true;
    setTimeout(flush, delayMs);
  });
}

async function serve({ host, port, delayMs }) {
  const server = createServer((client) => {
    client.setNoDelay(true);
    const upstream = connect({ host, port });
    upstream.setNoDelay(true);
    for (const s of [client, upstream]) s.on("error", () => {});
    delayed(client, upstream, delayMs);
    delayed(upstream, client, delayMs);
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  console.log(JSON.stringify({ msg: "ready", port: server.address().port }));
}

/** Starts the link to the server of `targetUrl` in a process of `group`; the same URL through it. */
export async function startDelayLink(group, targetUrl, delayMs) {
  const target = new URL(targetUrl);
  const proc = group.start("db-delay-link", process.execPath, [
    SELF,
    JSON.stringify({ host: target.hostname, port: Number(target.port), delayMs }),
  ]);
  const ready = await proc.waitForMsg("ready", { timeoutMs: 30_000 });
  const url = new URL(targetUrl);
  url.port = String(ready.port);
  return { url: url.toString().replace(/\/$/, ""), pid: proc.pid };
}

if (process.argv[1] === SELF) await serve(JSON.parse(process.argv[2]));
