// A throwaway nats-server (JetStream on, store in a temp dir) on a free loopback port, which a
// test can kill and restart on the same port. NATS_URL, when set, is used instead for tests
// that do not kill the server.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { makeTempDir } from "./cleanup";
import { freePort } from "./ports";
import { ManagedProcess } from "./process";
import { waitForTcp } from "./wait";

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

function natsBinary(): string {
  return existsSync("/usr/sbin/nats-server") ? "/usr/sbin/nats-server" : "nats-server";
}

async function startOwned(): Promise<Nats> {
  const dir = makeTempDir("nats");
  const port = await freePort();
  const storeDir = join(dir, "js");
  let generation = 0;
  let proc: ManagedProcess | undefined;
  const launch = async () => {
    generation += 1;
    proc = new ManagedProcess({
      name: `nats-${port}`,
      command: natsBinary(),
      args: ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir],
      logFile: join(dir, `nats-${generation}.log`),
    });
    await Promise.race([
      waitForTcp("127.0.0.1", port, READY_MS),
      proc.exited.then((e) => {
        throw new Error(`nats-server exited at start (code ${e.code}):\n${proc?.tail()}`);
      }),
    ]);
  };
  await launch();
  return {
    url: `nats://127.0.0.1:${port}`,
    owned: true,
    storeDir,
    stop: async (signal = "SIGTERM") => {
      await proc?.stop(signal);
    },
    restart: async () => {
      await proc?.stop("SIGKILL");
      await launch();
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
