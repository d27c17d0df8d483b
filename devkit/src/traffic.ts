// Traffic a user sends to a deployed application while it is redeployed: `Host: <fqdn>`
// requests through the reverse proxy, each on a fresh connection, in a steady stream that
// counts every answer that is not a 200 `version <label>` as a failure. This is how the
// deployment tests and bench/deploy.mjs measure "zero failed requests" across a switch.
import { request } from "node:http";

const REQUEST_TIMEOUT_MS = 5_000;

export interface ProxyResponse {
  status: number;
  body: string;
}

/**
 * GET http://127.0.0.1:<port><path> with the given Host header, on a fresh connection each
 * time (no keep-alive): after a reload, a kept-alive connection would still reach the proxy's
 * old configuration.
 */
export function proxyGet(port: number, host: string, path = "/"): Promise<ProxyResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path, method: "GET", headers: { host, connection: "close" }, agent: false },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        res.on("error", reject);
      },
    );
    req.setTimeout(REQUEST_TIMEOUT_MS, () =>
      req.destroy(new Error(`no answer from 127.0.0.1:${port} for ${host}`)),
    );
    req.on("error", reject);
    req.end();
  });
}

export interface TrafficFailure {
  /** ISO time of the answer (or the error). */
  at: string;
  /** HTTP status, or 0 for a connection error. */
  status: number;
  detail: string;
}

export interface TrafficReport {
  total: number;
  /** Every failed request, counted exactly. */
  failed: number;
  /** The first `keepFailures` of them, for the report. */
  failures: TrafficFailure[];
  /** Answers per body (`version <label>`). */
  versions: Record<string, number>;
  /** Bodies in the order they were first answered. */
  sequence: string[];
  /**
   * Answers of a version older than one already answered before the request was sent:
   * traffic that went back. Requests in flight across the switch may get either version,
   * so they do not count.
   */
  stale: number;
}

export interface Traffic {
  /** A live view of the counts so far. */
  report(): TrafficReport;
  /** Stops sending, waits for requests in flight, returns the counts. */
  stop(): Promise<TrafficReport>;
}

export interface TrafficOptions {
  /** Requests in flight at once. @default 2 */
  concurrency?: number;
  /** Pause between a worker's requests, to leave CPU to the deployment. @default 10 */
  pauseMs?: number;
  /** @default "/" */
  path?: string;
  /** Failures kept in the report (a bench run of many deploys could collect thousands). @default 20 */
  keepFailures?: number;
}

const isVersion = (body: string) => /^version \S+$/.test(body);

/** Starts sending requests to 127.0.0.1:<port> with `Host: <host>` until stop(). */
export function startTraffic(port: number, host: string, opts: TrafficOptions = {}): Traffic {
  const keep = opts.keepFailures ?? 20;
  const r: TrafficReport = { total: 0, failed: 0, failures: [], versions: {}, sequence: [], stale: 0 };
  /** When each version was first answered. */
  const firstAnswer = new Map<string, number>();
  let running = true;
  const fail = (status: number, detail: string) => {
    r.failed += 1;
    if (r.failures.length < keep) r.failures.push({ at: new Date().toISOString(), status, detail });
  };
  const one = async () => {
    const sentAt = Date.now();
    r.total += 1;
    let res: ProxyResponse;
    try {
      res = await proxyGet(port, host, opts.path ?? "/");
    } catch (err) {
      fail(0, (err as Error).message);
      return;
    }
    if (res.status !== 200 || !isVersion(res.body)) {
      fail(res.status, res.body.slice(0, 200));
      return;
    }
    r.versions[res.body] = (r.versions[res.body] ?? 0) + 1;
    if (!firstAnswer.has(res.body)) {
      firstAnswer.set(res.body, Date.now());
      r.sequence.push(res.body);
    }
    const newer = r.sequence.slice(r.sequence.indexOf(res.body) + 1);
    if (newer.some((v) => (firstAnswer.get(v) ?? Number.POSITIVE_INFINITY) < sentAt)) r.stale += 1;
  };
  const worker = async () => {
    while (running) {
      await one();
      await new Promise((resolve) => setTimeout(resolve, opts.pauseMs ?? 10));
    }
  };
  const workers = Array.from({ length: opts.concurrency ?? 2 }, worker);
  const snapshot = (): TrafficReport => ({
    ...r,
    failures: [...r.failures],
    versions: { ...r.versions },
    sequence: [...r.sequence],
  });
  return {
    report: snapshot,
    async stop() {
      running = false;
      await Promise.all(workers);
      return snapshot();
    },
  };
}
