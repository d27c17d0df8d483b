// Traffic a user sends to a deployed application while it is redeployed: a
// steady stream of `Host: <fqdn>` requests through the proxy, each on a fresh
// connection (proxy-client.ts says why), counting every answer that is not a
// 200 with a version body as a failure. This is how the tests and the benchmark
// measure "zero failed requests" across a switch.
import { proxyGet } from "./proxy-client";
import { pollUntil } from "./wait";

export interface TrafficFailure {
  at: number;
  /** HTTP status, or 0 for a connection error. */
  status: number;
  detail: string;
}

export interface TrafficReport {
  total: number;
  failures: TrafficFailure[];
  /** Answers per body (`version <label>`). */
  versions: Record<string, number>;
  /** Bodies in the order they were first answered. */
  sequence: string[];
  /**
   * Answers of a version older than one already answered before the request was
   * sent: traffic that went back. Requests in flight across the switch may get
   * either version, so they do not count.
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
  path?: string;
}

const isVersion = (body: string) => /^version \S+$/.test(body);

/** Starts sending requests to 127.0.0.1:<port> with `Host: <host>` until stop(). */
export function startTraffic(port: number, host: string, opts: TrafficOptions = {}): Traffic {
  const r: TrafficReport = { total: 0, failures: [], versions: {}, sequence: [], stale: 0 };
  /** When each version was first answered. */
  const firstAnswer = new Map<string, number>();
  let running = true;
  const one = async () => {
    const sentAt = Date.now();
    try {
      const res = await proxyGet(port, host, opts.path ?? "/");
      r.total += 1;
      if (res.status !== 200 || !isVersion(res.body)) {
        r.failures.push({ at: Date.now(), status: res.status, detail: res.body.slice(0, 200) });
        return;
      }
      r.versions[res.body] = (r.versions[res.body] ?? 0) + 1;
      if (!firstAnswer.has(res.body)) {
        firstAnswer.set(res.body, Date.now());
        r.sequence.push(res.body);
      }
      const newer = r.sequence.slice(r.sequence.indexOf(res.body) + 1);
      if (newer.some((v) => firstAnswer.get(v)! < sentAt)) r.stale += 1;
    } catch (err) {
      r.total += 1;
      r.failures.push({ at: Date.now(), status: 0, detail: (err as Error).message });
    }
  };
  const worker = async () => {
    while (running) {
      await one();
      await new Promise((resolve) => setTimeout(resolve, opts.pauseMs ?? 10));
    }
  };
  const workers = Array.from({ length: opts.concurrency ?? 2 }, worker);
  const snapshot = (): TrafficReport => ({
    total: r.total,
    failures: [...r.failures],
    versions: { ...r.versions },
    sequence: [...r.sequence],
    stale: r.stale,
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

/** Polls until `host` through the proxy answers 200 with exactly `body`; the error says what it answered last. */
export async function waitForBody(
  port: number,
  host: string,
  body: string,
  timeoutMs = 30_000,
  path = "/",
): Promise<void> {
  let last = "no answer yet";
  await pollUntil(
    async () => {
      const res = await proxyGet(port, host, path).catch((err: Error) => ({ status: 0, body: err.message }));
      last = `${res.status} ${JSON.stringify(res.body.slice(0, 200))}`;
      return res.status === 200 && res.body === body ? true : undefined;
    },
    { what: `${host}${path} via 127.0.0.1:${port} to answer ${JSON.stringify(body)}`, timeoutMs },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last answer ${last}`);
  });
}
