// Requests a user sends through the proxy while a bench deploys: `Host: <fqdn>` on a fresh
// connection each time (a kept-alive one would stay on the proxy's old config), and a steady
// stream of them that counts every answer that is not a 200 `version <label>` as a failure.
// The bench's copy of test/harness/traffic.ts (the benches run plain .mjs, not TypeScript).
import { request } from "node:http";

const REQUEST_TIMEOUT_MS = 5_000;
/** Failures kept in the report (the count is always exact). */
const KEEP_FAILURES = 20;

export function proxyGet(port, host, path = "/") {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path, headers: { host, connection: "close" }, agent: false },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c) => {
          body += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        res.on("error", reject);
      },
    );
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error(`no answer for ${host}`)));
    req.on("error", reject);
    req.end();
  });
}

/**
 * Sends requests with `concurrency` workers, each pausing `pauseMs` between two, until stop().
 * `stale` counts answers of a version older than one already answered before the request was
 * sent (requests in flight across a switch may get either version and do not count).
 */
export function startTraffic(port, host, { concurrency = 2, pauseMs = 10 } = {}) {
  const r = { total: 0, failed: 0, failures: [], versions: {}, sequence: [], stale: 0 };
  const firstAnswer = new Map();
  let running = true;
  const fail = (status, detail) => {
    r.failed += 1;
    if (r.failures.length < KEEP_FAILURES) r.failures.push({ at: new Date().toISOString(), status, detail });
  };
  const one = async () => {
    const sentAt = Date.now();
    r.total += 1;
    let res;
    try {
      res = await proxyGet(port, host);
    } catch (err) {
      fail(0, err.message);
      return;
    }
    if (res.status !== 200 || !/^version \S+$/.test(res.body)) {
      fail(res.status, res.body.slice(0, 200));
      return;
    }
    r.versions[res.body] = (r.versions[res.body] ?? 0) + 1;
    if (!firstAnswer.has(res.body)) {
      firstAnswer.set(res.body, Date.now());
      r.sequence.push(res.body);
    }
    const newer = r.sequence.slice(r.sequence.indexOf(res.body) + 1);
    if (newer.some((v) => firstAnswer.get(v) < sentAt)) r.stale += 1;
  };
  const worker = async () => {
    while (running) {
      await one();
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  return {
    async stop() {
      running = false;
      await Promise.all(workers);
      return r;
    },
  };
}
