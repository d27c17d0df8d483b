import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import test from "ava";
import { freePort, onFreePort } from "./ports.js";

const ephemeralStart = Number(
  readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0],
);

function listen(port: number): Promise<() => Promise<void>> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(() => new Promise((done) => server.close(() => done()))));
  });
}

test("ports - freePort picks below the ephemeral range, where outgoing connections do not take ports", async (t) => {
  const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
  for (const port of ports) t.true(port >= 10_000 && port < ephemeralStart, `port ${port}`);
});

test("ports - a port from freePort can be bound at once", async (t) => {
  const port = await freePort();
  await t.notThrowsAsync(listen(port).then((close) => close()));
});

test("ports - onFreePort starts again on another port when the first one is taken", async (t) => {
  const tried: number[] = [];
  const port = await onFreePort(async (p) => {
    tried.push(p);
    if (tried.length === 1) throw new Error("taken in between");
    return p;
  });
  t.is(tried.length, 2);
  t.is(port, tried[1]);
});
