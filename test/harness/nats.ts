// A throwaway nats-server (JetStream on, store in a temp dir) on a loopback port it picks
// itself (`-p -1`) and reports in its log, which a test can kill and restart on that same
// port. NATS_URL, when set, is used instead for tests that do not kill the server.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { makeTempDir } from "./cleanup";
import { listenPortOf } from "./ports";
import { ManagedProcess } from "./process";

const READY_MS = 15_000;
const LISTEN_LINE = "Listening for client connections on";

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
  const storeDir = join(dir, "js");
  let generation = 0;
  let proc: ManagedProcess | undefined;
  /** Starts nats-server on port (-1: one it picks) and resolves with the port it listens on. */
  const launch = async (port: number) => {
    generation += 1;
    proc = new ManagedProcess({
      name: `nats#${generation}`,
      command: natsBinary(),
      args: ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir],
      logFile: join(dir, `nats-${generation}.log`),
    });
    // "Server is ready" comes after the listen line: the port is bound and accepting.
    await proc.waitForLine((l) => l.text.includes("Server is ready"), {
      what: '"Server is ready"',
      timeoutMs: READY_MS,
    });
    const listening = proc.lines.map((l) => listenPortOf(l.text, LISTEN_LINE)).find((p) => p !== undefined);
    if (listening === undefined) throw new Error(`nats-server did not log its port:\n${proc.tail()}`);
    return listening;
  };
  const port = await launch(-1);
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
