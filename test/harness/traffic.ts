// Traffic a user sends to a deployed application while it is redeployed. The steady
// request stream (startTraffic) is @relayctl/devkit's, shared with bench/deploy.mjs; what
// only the tests need, waiting until a domain answers a body, is here.
import { proxyGet } from "./proxy-client";
import { pollUntil } from "./wait";

export {
  type Traffic,
  type TrafficFailure,
  type TrafficOptions,
  type TrafficReport,
  startTraffic,
} from "@relayctl/devkit";

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
