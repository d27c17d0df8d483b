// Throwaway nats-server, MariaDB and Caddy, started one way for the test harness, make test's
// runner (scripts/test-run.mjs) and the benchmarks: the arguments that work on these machines
// (shared/DESIGN.md), the log line that says each is ready (an event, never a sleep), and the
// port each reports or, where it cannot pick one, the port it was given. Each caller supervises
// the processes its own way (a test file's cleanup, a bench run's group): it passes `launch`.
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { listenPortOf } from "./ports.js";
import { ManagedProcess, type SpawnOptions } from "./process.js";

/** Starts a supervised process the caller's way. @default a plain ManagedProcess */
export type Launch = (opts: SpawnOptions & { logFile: string }) => ManagedProcess;

const supervised: Launch = (opts) => new ManagedProcess(opts);
const READY_MS = 60_000;

/** `name` from PATH, else from the sbin dirs Debian installs servers in (often not on PATH). */
export function serverBinary(name: string): string {
  for (const dir of (process.env.PATH ?? "").split(":"))
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  for (const dir of ["/usr/sbin", "/usr/bin", "/sbin"])
    if (existsSync(join(dir, name))) return join(dir, name);
  return name;
}

const NATS_LISTEN_LINE = "Listening for client connections on";

/**
 * nats-server on 127.0.0.1, client port `port` (-1: one it picks, race-free) plus `args`;
 * resolves once it logs "Server is ready" (after its listen line: bound and accepting) with the
 * port it listens on.
 */
export async function launchNats(opts: {
  name: string;
  logFile: string;
  port?: number;
  args?: string[];
  launch?: Launch;
}): Promise<{ proc: ManagedProcess; port: number; url: string }> {
  const proc = (opts.launch ?? supervised)({
    name: opts.name,
    command: serverBinary("nats-server"),
    args: ["-a", "127.0.0.1", "-p", String(opts.port ?? -1), ...(opts.args ?? [])],
    logFile: opts.logFile,
  });
  await proc.waitForLine((l) => l.text.includes("Server is ready"), {
    what: 'nats-server "Server is ready"',
    timeoutMs: READY_MS,
  });
  const port = proc.lines.map((l) => listenPortOf(l.text, NATS_LISTEN_LINE)).find((p) => p !== undefined);
  if (port === undefined) throw new Error(`nats-server did not log its port:\n${proc.tail()}`);
  return { proc, port, url: `nats://127.0.0.1:${port}` };
}

/**
 * mariadb-install-db into `dataDir` (root@127.0.0.1 without a password), tried up to three
 * times: its bootstrap mariadbd crashes now and then on these machines (signal 11, about 1 in 6
 * parallel installs). Supervised like a server, so a stop during the install stops its
 * bootstrap mariadbd too. The install takes ~2 s idle: run it once where a caller can.
 */
export async function installMariaDb(opts: {
  dataDir: string;
  logDir: string;
  launch?: Launch;
}): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    rmSync(opts.dataDir, { recursive: true, force: true });
    const proc = (opts.launch ?? supervised)({
      name: "mariadb-install-db",
      command: serverBinary("mariadb-install-db"),
      args: [
        "--no-defaults",
        `--datadir=${opts.dataDir}`,
        "--user=root",
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
      ],
      logFile: join(opts.logDir, `install-${attempt}.log`),
    });
    const { code, signal } = await proc.exited;
    if (code === 0) return;
    if (attempt >= 3)
      throw new Error(`mariadb-install-db failed (${signal ?? `exit ${code}`}):\n${proc.tail()}`);
  }
}

/**
 * mariadbd on 127.0.0.1:`port` over an installed `dataDir`, its socket, pid file and temp dir
 * in `dir`; resolves once it logs "ready for connections" (also after a crash recovery) and
 * rejects when it exits first, as it does when the port was taken: mariadbd cannot pick a port
 * (--port=0 means 3306), so callers give it a freePort() inside onFreePort().
 */
export async function launchMariaDb(opts: {
  dir: string;
  dataDir: string;
  port: number;
  logFile: string;
  /** More server options, e.g. --max-connections for a server many processes share. */
  args?: string[];
  launch?: Launch;
}): Promise<ManagedProcess> {
  const proc = (opts.launch ?? supervised)({
    name: `mariadb-${opts.port}`,
    command: serverBinary("mariadbd"),
    args: [
      "--no-defaults",
      `--datadir=${opts.dataDir}`,
      `--port=${opts.port}`,
      "--bind-address=127.0.0.1",
      `--socket=${join(opts.dir, "db.sock")}`,
      `--pid-file=${join(opts.dir, "db.pid")}`,
      "--user=root",
      "--skip-log-bin",
      // Its own temp dir, not /tmp: a query's internal temp tables (a sort of large rows) live
      // there, and files in /tmp were seen deleted under a running query while the whole suite
      // ran ("Error on delete of '/tmp/#sql-temptable…'", a 500 to the caller).
      `--tmpdir=${opts.dir}`,
      ...(opts.args ?? []),
    ],
    logFile: opts.logFile,
  });
  await proc.waitForLine((l) => l.text.includes("ready for connections"), {
    what: 'mariadbd "ready for connections"',
    timeoutMs: READY_MS,
  });
  return proc;
}

/**
 * `caddy run` with a boot config holding only its admin API on 127.0.0.1:`adminPort`, HOME and
 * the XDG dirs in `home` (it never touches the real user's data or certificates); resolves once
 * it logs "serving initial configuration", rejects when it exits first. Caddy logs its configured
 * admin address, not a bound one, and binds it again at every config load, so port 0 cannot be
 * used: callers give it a freePort() inside onFreePort().
 */
export async function launchCaddy(opts: {
  name: string;
  adminPort: number;
  home: string;
  bootFile: string;
  logFile: string;
  launch?: Launch;
}): Promise<ManagedProcess> {
  mkdirSync(opts.home, { recursive: true });
  writeFileSync(opts.bootFile, JSON.stringify({ admin: { listen: `127.0.0.1:${opts.adminPort}` } }));
  const proc = (opts.launch ?? supervised)({
    name: opts.name,
    command: serverBinary("caddy"),
    args: ["run", "--config", opts.bootFile],
    env: { ...process.env, HOME: opts.home, XDG_DATA_HOME: opts.home, XDG_CONFIG_HOME: opts.home },
    cwd: opts.home,
    logFile: opts.logFile,
  });
  await proc.waitForMsg("serving initial configuration", { timeoutMs: READY_MS });
  return proc;
}
