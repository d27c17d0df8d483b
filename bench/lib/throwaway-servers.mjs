// Throwaway servers for one bench run, inside the run's temp dir: nats-server and MariaDB started
// by @relayctl/devkit (as the test harness and make test start theirs), and sshd.
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { installMariaDb, launchMariaDb, launchNats } from "@relayctl/devkit";
import { freePort, onFreePort, run } from "./processes.mjs";

/** Fails with one clear line when a program the bench runs is not installed. */
export function requireProgram(path, hint) {
  if (!existsSync(path)) throw new Error(`${path} not found: ${hint}`);
}

function which(name) {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  for (const dir of ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]) {
    if (existsSync(join(dir, name))) return join(dir, name);
  }
  return null;
}

export function requireOnPath(name, hint) {
  const path = which(name);
  if (!path) throw new Error(`${name} not found on PATH: ${hint}`);
  return path;
}

/** nats-server with JetStream in dir/js, on a port it picks (`-p -1`) and logs (@relayctl/devkit). */
export async function startNats(group, dir) {
  requireOnPath("nats-server", "install the Debian package nats-server (make bench does)");
  const { url, proc } = await launchNats({
    name: "nats-server",
    args: ["-js", "-sd", join(dir, "js")],
    logFile: join(dir, "nats-server.log"),
    launch: group.launch,
  });
  return { url, proc };
}

/**
 * InnoDB's buffer pool of the benches' MariaDB: large enough that what a run writes stays in memory,
 * as a production database's working set does on a server sized for it. With MariaDB's default
 * (128 MiB) the control plane's tables, carrying the earlier sections' operations, outgrew it in
 * exec-throughput's alternated rounds while the floor's second database started empty, so those
 * rounds compared disk reads on one side with none on the other (bench/README.md, exec-throughput).
 */
const BUFFER_POOL = process.env.BENCH_MARIADB_BUFFER_POOL || "2G";

/**
 * MariaDB in dir/db with root@127.0.0.1 and no password, plus an empty database `relayctl`;
 * installed and started by @relayctl/devkit, as the test harness does, with a buffer pool of
 * BUFFER_POOL.
 */
export async function startMariadb(group, dir) {
  const hint = "install the Debian package mariadb-server (make bench does)";
  for (const program of ["mariadb-install-db", "mariadbd"]) requireOnPath(program, hint);
  const client = requireOnPath("mariadb", hint);
  const dataDir = join(dir, "db");
  await installMariaDb({ dataDir, logDir: dir, launch: group.launch });
  // mariadbd cannot pick a port itself (--port=0 means 3306): a port taken between freePort
  // and its bind makes it exit, and it starts again on another one.
  let proc;
  const port = await onFreePort(async (p) => {
    proc = await launchMariaDb({
      dir,
      dataDir,
      port: p,
      logFile: join(dir, "mariadb.log"),
      launch: group.launch,
      args: [`--innodb-buffer-pool-size=${BUFFER_POOL}`],
    });
    return p;
  });
  const socket = join(dir, "db.sock");
  await run(client, ["--no-defaults", `--socket=${socket}`, "-uroot", "-e", "CREATE DATABASE relayctl"]);
  return { url: `mysql://root@127.0.0.1:${port}/relayctl`, proc };
}

/**
 * sshd on 127.0.0.1:<free port> with a generated host key, accepting one generated ed25519 client
 * key for the current user. Returns the argv prefix of an ssh client that logs in without prompts.
 */
export async function startSshd(group, dir) {
  const hint = "install the Debian packages openssh-server and openssh-client (make bench does)";
  requireProgram("/usr/sbin/sshd", hint);
  const ssh = requireOnPath("ssh", hint);
  const keygen = requireOnPath("ssh-keygen", hint);
  const sshDir = join(dir, "ssh");
  await mkdir(sshDir, { recursive: true, mode: 0o700 });
  // sshd refuses to start without its privilege separation directory.
  if (!existsSync("/run/sshd")) await mkdir("/run/sshd", { recursive: true, mode: 0o755 });
  const hostKey = join(sshDir, "host_ed25519");
  const clientKey = join(sshDir, "client_ed25519");
  await run(keygen, ["-q", "-t", "ed25519", "-N", "", "-C", "relayctl-bench-host", "-f", hostKey]);
  await run(keygen, ["-q", "-t", "ed25519", "-N", "", "-C", "relayctl-bench-client", "-f", clientKey]);
  const authorizedKeys = join(sshDir, "authorized_keys");
  await writeFile(authorizedKeys, await readFile(`${clientKey}.pub`));
  await chmod(authorizedKeys, 0o600);
  const port = await freePort();
  const config = join(sshDir, "sshd_config");
  await writeFile(
    config,
    [
      "ListenAddress 127.0.0.1",
      `HostKey ${hostKey}`,
      `PidFile ${join(sshDir, "sshd.pid")}`,
      `AuthorizedKeysFile ${authorizedKeys}`,
      "StrictModes no",
      "UsePAM no",
      "PermitRootLogin yes",
      "PubkeyAuthentication yes",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "UseDNS no",
      "PrintMotd no",
      "MaxStartups 100:30:200",
      "LogLevel INFO",
      "",
    ].join("\n"),
  );
  const proc = group.start("sshd", "/usr/sbin/sshd", ["-D", "-e", "-f", config, "-p", String(port)]);
  await proc.waitForLine((l) => l.text.includes("Server listening on"), {
    what: '"Server listening on"',
    timeoutMs: 15_000,
  });
  const clientArgs = [
    "-F",
    "/dev/null",
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "BatchMode=yes",
    "-o",
    "IdentitiesOnly=yes",
    "-o",
    "LogLevel=ERROR",
    "-i",
    clientKey,
    "-p",
    String(port),
  ];
  return { ssh, clientArgs, sshDir };
}
