// A private container registry for the tests: Debian's docker-registry with
// htpasswd (bcrypt) auth on a loopback port of its own choosing, over plain http. podman does
// not trust a plain-http registry by itself (docker does for 127.0.0.0/8), so the
// registry comes with a registries.conf that marks it insecure: an agent gets it
// through CONTAINERS_REGISTRIES_CONF. pushImage puts a locally built image there
// through a temporary auth file (login with --password-stdin), then removes the
// local copy, so whoever runs it next has to pull it from the registry.
import { execFileSync, spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeTempDir } from "./cleanup";
import { podman, podmanAgentEnv } from "./containers";
import { listenPortOf, onFreePort } from "./ports";
import { ManagedProcess } from "./process";
import { waitForTcp } from "./wait";

export interface Registry {
  /** 127.0.0.1:<port> */
  host: string;
  username: string;
  password: string;
  /** A registries.conf marking this registry insecure (plain http), for CONTAINERS_REGISTRIES_CONF. */
  registriesConf: string;
  proc: ManagedProcess;
  /** Tags a local image as <host>/<repository>, pushes it with the credentials, removes the local tags. */
  pushImage(localImage: string, repository: string): Promise<string>;
}

interface RegistryOptions {
  username: string;
  password: string;
  /** No authentication at all: anyone pulls and pushes (an image a CI pushed to a public registry). */
  open?: boolean;
}

function writeConfig(dir: string, opts: RegistryOptions, port: number): string {
  if (!opts.open)
    writeFileSync(join(dir, "htpasswd"), execFileSync("htpasswd", ["-Bbn", opts.username, opts.password]));
  const file = join(dir, "config.yml");
  writeFileSync(
    file,
    [
      "version: 0.1",
      "log: { level: info }",
      `storage: { filesystem: { rootdirectory: ${join(dir, "data")} } }`,
      // A freePort pick, not port 0: one of the ephemeral range can be one a stopped container's
      // DNAT rules still send elsewhere (devkit's listenOnFreePort).
      `http: { addr: "127.0.0.1:${port}", secret: test-only-secret }`,
      opts.open ? "" : `auth: { htpasswd: { realm: relayctl-test, path: ${join(dir, "htpasswd")} } }`,
      "",
    ].join("\n"),
  );
  return file;
}

/** podman login reading the password from stdin, into a throwaway auth file. */
function login(host: string, opts: RegistryOptions, authfile: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      "podman",
      ["login", "--tls-verify=false", "--authfile", authfile, "-u", opts.username, "--password-stdin", host],
      { env: { ...process.env, CONTAINERS_CONF: podmanAgentEnv.CONTAINERS_CONF } },
    );
    let err = "";
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
    });
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`podman login ${host} exited ${code}: ${err}`)),
    );
    child.stdin.end(opts.password);
  });
}

/**
 * A registry on a loopback port that lets `username`:`password` (only) push and pull;
 * with `{open: true}`, anyone (username and password are then unused).
 */
export async function startRegistry(
  username: string,
  password: string,
  options: { open?: boolean } = {},
): Promise<Registry> {
  const opts: RegistryOptions = { username, password, open: options.open };
  const dir = makeTempDir("registry");
  // The registry exits when its port was taken in between: it starts again on another one.
  const { proc, port } = await onFreePort(async (pick) => {
    const config = writeConfig(dir, opts, pick);
    const proc = new ManagedProcess({
      name: "docker-registry",
      command: "docker-registry",
      args: ["serve", config],
      logFile: join(dir, `registry-${pick}.log`),
    });
    const marker = "listening on";
    const listening = await proc.waitForLine((l) => listenPortOf(l.text, marker) !== undefined, {
      what: `docker-registry "${marker} 127.0.0.1:P"`,
      timeoutMs: 15_000,
    });
    const port = listenPortOf(listening.text, marker)!;
    await waitForTcp("127.0.0.1", port, 15_000);
    return { proc, port };
  });
  const host = `127.0.0.1:${port}`;
  const registriesConf = join(dir, "registries.conf");
  writeFileSync(registriesConf, `[[registry]]\nlocation = "${host}"\ninsecure = true\n`);
  return {
    host,
    username: opts.username,
    password: opts.password,
    registriesConf,
    proc,
    async pushImage(localImage, repository) {
      const ref = `${host}/${repository}`;
      const authDir = makeTempDir("registry-auth");
      const authfile = join(authDir, "auth.json");
      try {
        await podman(["tag", localImage, ref]);
        if (opts.open) await podman(["push", "-q", "--tls-verify=false", ref]);
        else {
          await login(host, opts, authfile);
          await podman(["push", "-q", "--tls-verify=false", "--authfile", authfile, ref]);
        }
      } finally {
        rmSync(authDir, { recursive: true, force: true });
      }
      await podman(["rmi", ref]);
      return ref;
    },
  };
}
