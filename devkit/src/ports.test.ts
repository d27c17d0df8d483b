import { readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { freePort, listenOnFreePort, onFreePort } from "./ports.js";

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

test("ports - a port freePort handed out is not handed out again while its process lives, even unbound", async (t) => {
  // Caddy binds its http port only once routes are loaded: a picked port may stay unbound a while.
  // One after the other (picks at once are kept apart by their binds): ~90 repeats without claims.
  const ports: number[] = [];
  for (let i = 0; i < 2_000; i++) ports.push(await freePort());
  t.is(new Set(ports).size, ports.length);
});

/** A child process that picks n ports with freePort, prints them, and stays alive until killed. */
async function pickerChild(
  n: number,
): Promise<{ ports: Set<number>; pid: number | undefined; kill: (signal: NodeJS.Signals) => Promise<void> }> {
  const { spawn } = await import("node:child_process");
  const code = `const { freePort } = require(${JSON.stringify(require.resolve("@relayctl/devkit"))});
    (async () => { const ps = []; for (let i = 0; i < ${n}; i++) ps.push(await freePort());
      process.stdout.write(ps.join(" ") + "\\n"); setInterval(() => {}, 60000); })();`;
  const child = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  const ports = await new Promise<Set<number>>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.endsWith("\n")) resolve(new Set(out.trim().split(" ").map(Number)));
    });
    child.once("exit", (c) => reject(new Error(`the picker exited (${c}) before printing its ports`)));
  });
  const kill = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((done) => child.once("exit", done));
    child.kill(signal);
    await gone;
  };
  return { ports, kill, pid: child.pid };
}

test("ports - a port another live process claimed is never picked; a killed process's claims are taken over", async (t) => {
  // 3,000 picks each in a range of ~22,000: without claims ~400 of ours would be the child's.
  const child = await pickerChild(3_000);
  t.teardown(() => child.kill("SIGKILL"));
  const mine = await Promise.all(Array.from({ length: 3_000 }, () => freePort()));
  t.deepEqual(
    mine.filter((p) => child.ports.has(p)),
    [],
  );
  // SIGKILL: no exit handler releases its claims, so only the takeover of a dead pid's claim frees them.
  await child.kill("SIGKILL");
  t.teardown(() => {
    // The dead child's claims this test did not take over: the next picks would, but leave none.
    for (const p of child.ports) {
      const file = join(tmpdir(), "relayctl-port-claims", String(p));
      const owner = (() => {
        try {
          return readFileSync(file, "utf8");
        } catch {
          return undefined;
        }
      })();
      if (owner === String(child.pid)) rmSync(file, { force: true });
    }
  });
  const after = await Promise.all(Array.from({ length: 3_000 }, () => freePort()));
  t.true(
    after.some((p) => child.ports.has(p)),
    "a dead process's claims are taken over",
  );
});

test("ports - listenOnFreePort binds a server below the ephemeral range and resolves with its port", async (t) => {
  const server = createServer();
  const port = await listenOnFreePort(server);
  t.true(port >= 10_000 && port < ephemeralStart, `port ${port}`);
  const address = server.address();
  t.is(typeof address === "object" && address !== null ? address.port : -1, port);
  await new Promise<void>((done) => server.close(() => done()));
});
