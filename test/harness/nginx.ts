// A throwaway nginx: a main config in a temp prefix (pid, error log and temp
// paths inside it), `include <confDir>/*.conf;` in its http block, and a default
// server answering 404 on a free port. Writers given `listen: String(port)`
// share that port: their `listen <port>;` is the same socket as the default
// server's, where `listen 127.0.0.1:<port>` would clash with `*:<port>` and
// make the reload fail (only in nginx's error log).
//
// `daemon off` keeps the master as our child, so we stop it by pid and see it
// die; `-s reload` still works because it signals the pid in the pid file.
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeTempDir } from "./cleanup";
import { onFreePort } from "./ports";
import { ManagedProcess } from "./process";
import { pollUntil, waitForTcp } from "./wait";

const READY_MS = 15_000;

export interface NginxServer {
  /** Where nginx serves: the default server (404) and every route written with listen String(port). */
  port: number;
  /** Included by the main config: where the writer puts its files. */
  confDir: string;
  /** The main config, for `-c`. */
  configFile: string;
  /** The prefix, for `-p`. */
  prefix: string;
  stop(): Promise<void>;
}

export function nginxBinary(): string {
  return existsSync("/usr/sbin/nginx") ? "/usr/sbin/nginx" : "nginx";
}

function mainConfig(prefix: string, confDir: string, port: number): string {
  const tmp = join(prefix, "tmp");
  return `# throwaway nginx for relayctl tests
daemon off;
master_process on;
worker_processes 1;
pid ${join(prefix, "nginx.pid")};
error_log ${join(prefix, "error.log")} notice;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${tmp}/body;
  proxy_temp_path ${tmp}/proxy;
  fastcgi_temp_path ${tmp}/fastcgi;
  uwsgi_temp_path ${tmp}/uwsgi;
  scgi_temp_path ${tmp}/scgi;
  server {
    listen ${port} default_server;
    server_name _;
    return 404 "no route for this host\\n";
  }
  include ${confDir}/*.conf;
}
`;
}

export async function startNginx(): Promise<NginxServer> {
  const prefix = makeTempDir("nginx");
  // Workers run as nobody when we are root: they must reach the temp paths inside the prefix.
  chmodSync(prefix, 0o755);
  const confDir = join(prefix, "conf.d");
  mkdirSync(confDir);
  mkdirSync(join(prefix, "tmp"));
  const configFile = join(prefix, "nginx.conf");
  // nginx takes its port from the config and cannot report one it picked: a port taken
  // between freePort and nginx's bind makes it exit, and it starts again on another one.
  let proc: ManagedProcess | undefined;
  const port = await onFreePort(async (p) => {
    writeFileSync(configFile, mainConfig(prefix, confDir, p));
    proc = new ManagedProcess({
      name: `nginx-${p}`,
      command: nginxBinary(),
      args: ["-p", prefix, "-c", configFile],
      cwd: prefix,
      logFile: join(prefix, "nginx-stdio.log"),
    });
    const started = proc;
    await Promise.race([
      waitForTcp("127.0.0.1", p, READY_MS),
      started.exited.then((e) => {
        throw new Error(`nginx exited at start (code ${e.code}):\n${started.tail()}`);
      }),
    ]);
    // The port accepts before the pid file exists; `-s reload` needs the pid file.
    await pollUntil(() => (existsSync(join(prefix, "nginx.pid")) ? true : undefined), {
      what: "nginx pid file",
      timeoutMs: READY_MS,
    });
    return p;
  });
  return {
    port,
    confDir,
    configFile,
    prefix,
    // SIGTERM is nginx's fast shutdown (SIGQUIT would wait for open connections).
    stop: async () => {
      await proc?.stop("SIGTERM");
    },
  };
}
