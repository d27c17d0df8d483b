// A throwaway nats-server (JetStream on, store in a temp dir) on a loopback port picked below
// the ephemeral range (freePort; one of that range can be one a stopped container's DNAT rules
// still send elsewhere, see devkit's listenOnFreePort), which a test can kill and restart on that
// same port. NATS_URL, when set, is used instead for tests that do not kill the server.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { launchNats as launchNatsServer } from "@relayctl/devkit";
import { makeTempDir } from "./cleanup";
import { freePort, onFreePort } from "./ports";
import { ManagedProcess } from "./process";

const READY_MS = 15_000;

export interface Nats {
  url: string;
  /** False when NATS_URL points at a server this harness does not own. */
  owned: boolean;
  /** JetStream store directory (owned servers only). */
  storeDir?: string;
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts nats-server again on the same port and store dir; resolves once it accepts TCP. */
  restart(): Promise<void>;
}

/**
 * Runs nats-server with `args` on client port `port` (-1: one it picks) and resolves with the
 * port it listens on once it is ready (@relayctl/devkit's launchNats, supervised by this test
 * file). Also for a test's own differently configured server (nats-security's TLS).
 */
export async function launchNats(name: string, port: number, args: string[], logFile: string) {
  const { proc, port: listening } = await launchNatsServer({
    name,
    port,
    args,
    logFile,
    launch: (o) => new ManagedProcess(o),
  });
  return { proc: proc as ManagedProcess, port: listening };
}

async function startOwned(): Promise<Nats> {
  const dir = makeTempDir("nats");
  const storeDir = join(dir, "js");
  let generation = 0;
  let proc: ManagedProcess | undefined;
  const launch = async (port: number) => {
    generation += 1;
    const started = await launchNats(
      `nats#${generation}`,
      port,
      ["-js", "-sd", storeDir],
      join(dir, `nats-${generation}.log`),
    );
    proc = started.proc;
    return started.port;
  };
  const port = await onFreePort(launch);
  return {
    url: `nats://127.0.0.1:${port}`,
    owned: true,
    storeDir,
    stop: async (signal = "SIGTERM") => {
      await proc?.stop(signal);
    },
    restart: async () => {
      await proc?.stop("SIGKILL");
      await launch(port);
    },
  };
}

/** Starts a nats-server; with `shared` true and NATS_URL set, returns that server instead. */
export async function startNats(opts: { shared?: boolean } = {}): Promise<Nats> {
  const external = process.env.NATS_URL;
  if (opts.shared && external) {
    const refuse = async () => {
      throw new Error("NATS_URL server is not owned by the harness; start an owned one to kill it");
    };
    return { url: external, owned: false, stop: async () => {}, restart: refuse };
  }
  return startOwned();
}

let shared: Promise<Nats> | undefined;

/** One NATS per test file (ava runs each file in its own process), for tests that do not kill it. */
export function sharedNats(): Promise<Nats> {
  shared ??= startNats({ shared: true });
  return shared;
}

/** A cluster is a Nats too (startCluster's `nats`): url lists every node, stop and restart take all. */
export interface NatsCluster extends Nats {
  /** The client URLs of every node, comma-separated, as RELAYCTL_NATS_URL takes them. */
  url: string;
  /** Each node: stop(signal) kills it, restart() brings it back on its ports and store. */
  nodes: Nats[];
}

const CLUSTER_ATTEMPTS = 3;

/**
 * Three (or `size`) nats-server nodes in one cluster with JetStream, as DESIGN.md's recipe:
 * each node `-n nX -js -sd D/nX --cluster_name c --cluster nats://127.0.0.1:RPx --routes <all>`.
 * A JetStream cluster needs its routes configured at start, so route ports are picked ahead
 * (freePort) and the whole start is tried again when one was taken in between; so are client
 * ports, kept across restarts.
 */
export async function startNatsCluster(size = 3): Promise<NatsCluster> {
  for (let attempt = 1; ; attempt++) {
    const dir = makeTempDir("nats-cluster");
    const routePorts = await Promise.all(Array.from({ length: size }, () => freePort()));
    const routes = routePorts.map((p) => `nats://127.0.0.1:${p}`).join(",");
    const nodes = routePorts.map((routePort, i) => clusterNode(dir, `n${i + 1}`, routePort, routes));
    try {
      await Promise.all(nodes.map((n) => n.restart()));
      return {
        url: nodes.map((n) => n.url).join(","),
        owned: true,
        nodes,
        stop: async (signal) => {
          await Promise.all(nodes.map((n) => n.stop(signal)));
        },
        restart: async () => {
          await Promise.all(nodes.map((n) => n.restart()));
        },
      };
    } catch (err) {
      await Promise.all(nodes.map((n) => n.stop("SIGKILL")));
      if (attempt >= CLUSTER_ATTEMPTS) throw err;
    }
  }
}

/** One node; its first restart() is its start. */
function clusterNode(dir: string, name: string, routePort: number, routes: string): Nats {
  const storeDir = join(dir, name);
  let generation = 0;
  let port = 0; // picked at the first start
  let proc: ManagedProcess | undefined;
  const node: Nats = {
    url: "",
    owned: true,
    storeDir,
    stop: async (signal = "SIGTERM") => {
      await proc?.stop(signal);
    },
    restart: async () => {
      await proc?.stop("SIGKILL");
      generation += 1;
      if (port === 0) port = await freePort();
      const started = await launchNats(
        `nats-${name}#${generation}`,
        port,
        [
          ...["-n", name, "-js", "-sd", storeDir, "--cluster_name", "c"],
          ...["--cluster", `nats://127.0.0.1:${routePort}`, "--routes", routes],
        ],
        join(dir, `${name}-${generation}.log`),
      );
      proc = started.proc;
      // Routed to its peers: a node knows the JetStream meta leader only through them.
      await proc.waitForLine(
        (l) =>
          l.text.includes("JetStream cluster metadata leader") ||
          l.text.includes("JetStream cluster new metadata leader"),
        {
          what: "a JetStream metadata leader (routes up)",
          timeoutMs: READY_MS,
        },
      );
      port = started.port;
      node.url = `nats://127.0.0.1:${port}`;
    },
  };
  return node;
}

/**
 * How many client connections a node on this machine holds now: established TCP sockets whose
 * local port is its client port (/proc/net/tcp), so a test can kill the node its processes use.
 */
export function clientConnections(node: Nats): number {
  const port = Number(new URL(node.url).port).toString(16).toUpperCase().padStart(4, "0");
  const ESTABLISHED = "01";
  return readFileSync("/proc/net/tcp", "utf8")
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f[1]?.endsWith(`:${port}`) && f[3] === ESTABLISHED).length;
}
