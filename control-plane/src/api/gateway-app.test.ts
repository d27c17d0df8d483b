// The gateway role's HTTP listener on a real socket: alive while its database
// cannot be reached, not ready (503 naming the database), and the failed
// connection attempts counted in /metrics, which needs its token when set.
import test from "ava";
import { MemoryBus } from "../bus/memory-bus.js";
import { openDb } from "../db/knex.js";
import { createLogger } from "../lib/logger.js";
import { startGatewayHttp } from "./gateway-app.js";
import { countDbErrors } from "../observability/metrics.js";

const TOKEN = "unit-test-scrape-token-0123456789";

test("gateway http - /readyz is 503 naming the database while it cannot be reached; /healthz stays 200", async (t) => {
  // Port 1 on loopback: nothing listens, every connection attempt is refused.
  const db = openDb("mysql://relayctl:secret@127.0.0.1:1/relayctl");
  t.teardown(() => db.destroy());
  countDbErrors(db);
  const http = await startGatewayHttp(
    { host: "127.0.0.1", port: 0 },
    { db, bus: new MemoryBus(), busName: "job bus" },
    TOKEN,
    createLogger("silent", {}),
  );
  t.teardown(() => http.close());

  t.is((await fetch(`${http.url}/healthz`)).status, 200);
  const ready = await fetch(`${http.url}/readyz`);
  t.is(ready.status, 503);
  t.deepEqual(await ready.json(), { detail: "not ready: database unreachable" });

  t.is((await fetch(`${http.url}/metrics`)).status, 401);
  const scrape = await fetch(`${http.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  t.is(scrape.status, 200);
  const text = await scrape.text();
  const connect = /^relayctl_db_errors_total\{kind="connect"\} (\d+)$/m.exec(text);
  t.true(Number(connect?.[1]) >= 1, "the refused connection attempt is counted");
  t.regex(
    text,
    /^relayctl_http_request_duration_seconds_count\{method="GET",route="\/readyz",status="503"\} 1$/m,
  );
  t.false(text.includes("secret"), "the database password never reaches a scrape");
});
