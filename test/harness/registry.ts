// A throwaway image registry: Debian's docker-registry with htpasswd auth on a
// free loopback port (plain HTTP), and a registries.conf that lets podman talk
// to it (CONTAINERS_REGISTRIES_CONF for podman processes that should use it).
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeTempDir } from "./cleanup";
import { freePort } from "./ports";
import { ManagedProcess } from "./process";
import { waitForTcp } from "./wait";

export interface Registry {
  /** 127.0.0.1:<port> */
  host: string;
  /** A registries.conf marking the registry insecure (plain HTTP) for podman. */
  registriesConf: string;
}

export async function startRegistry(user: string, password: string): Promise<Registry> {
  const dir = makeTempDir("registry");
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  writeFileSync(join(dir, "htpasswd"), execFileSync("htpasswd", ["-Bbn", user, password]));
  writeFileSync(
    join(dir, "config.yml"),
    [
      "version: 0.1",
      "log: { level: info }",
      `storage: { filesystem: { rootdirectory: ${join(dir, "data")} } }`,
      `http: { addr: "${host}", secret: test-only-secret }`,
      `auth: { htpasswd: { realm: relayctl-test, path: ${join(dir, "htpasswd")} } }`,
      "",
    ].join("\n"),
  );
  const registriesConf = join(dir, "registries.conf");
  writeFileSync(registriesConf, `[[registry]]\nlocation = "${host}"\ninsecure = true\n`);
  new ManagedProcess({
    name: "docker-registry",
    command: "docker-registry",
    args: ["serve", join(dir, "config.yml")],
    logFile: join(dir, "registry.log"),
  });
  await waitForTcp("127.0.0.1", port, 15_000);
  return { host, registriesConf };
}
