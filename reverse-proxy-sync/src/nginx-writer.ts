// RouteWriter for nginx: one file per application, relayctl-<id>.conf, in a
// directory the operator's nginx.conf includes inside its http block. An apply
// replaces files atomically, asks `nginx -t` about the whole configuration, and
// reloads; when nginx refuses, every file this apply touched is put back.
//
// nginx facts (1.22, measured): `nginx -t` resolves proxy_pass host names (an
// unknown host fails the test), but does not bind, so a listen address that
// conflicts with another server only fails at reload, where the master logs
// the error, keeps the old configuration and `nginx -s reload` still exits 0.
// `-s reload` only signals the master: old workers answer for a short while after.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import type { LiveRoute, RouteChange, RouteWriter } from "./route-writer.js";
import { HEALTH_PATH, type RenderedRoute, sortedFqdns } from "./route.js";
import {
  FileJournal,
  assertRenderable,
  readRouteFiles,
  routeFilePattern,
  stageRouteFiles,
} from "./writer-support.js";

export interface NginxWriterOptions {
  /** Directory included by nginx.conf (`include <confDir>/*.conf;` in the http block). */
  confDir: string;
  /** The `listen` parameter of every server block. @default "80" */
  listen?: string;
  /** @default "nginx" (looked up on PATH) */
  nginxBin?: string;
  /** Main configuration file, passed as `-c`. @default nginx's compiled-in path */
  configFile?: string;
  /** Prefix path, passed as `-p`. @default nginx's compiled-in prefix */
  prefix?: string;
}

const run = promisify(execFile);
const FILE = routeFilePattern(".conf");
const NGINX_TIMEOUT_MS = 60_000;

export class NginxWriter implements RouteWriter {
  readonly kind = "nginx" as const;
  readonly drains = true;
  readonly #confDir: string;
  readonly #listen: string;
  readonly #bin: string;
  readonly #baseArgs: string[];

  constructor(opts: NginxWriterOptions) {
    this.#confDir = opts.confDir;
    this.#listen = opts.listen ?? "80";
    this.#bin = opts.nginxBin ?? "nginx";
    this.#baseArgs = [
      ...(opts.prefix ? ["-p", opts.prefix] : []),
      ...(opts.configFile ? ["-c", opts.configFile] : []),
    ];
  }

  /** The file content this writer produces for one application. */
  render(route: RenderedRoute): string {
    return [
      `# relayctl route for application ${route.applicationId}: written by the relayctl agent, edits are undone`,
      "server {",
      `    listen ${this.#listen};`,
      `    server_name ${route.fqdns.join(" ")};`,
      "",
      // Answered by nginx itself for a load balancer (fleets.md "Traffic"); only this exact path.
      `    location = ${HEALTH_PATH} {`,
      "        default_type text/plain;",
      route.draining ? '        return 503 "draining\\n";' : '        return 200 "live\\n";',
      "    }",
      "",
      "    location / {",
      `        proxy_pass http://${route.upstream};`,
      "        proxy_set_header Host $host;",
      "        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
      "        proxy_set_header X-Forwarded-Proto $scheme;",
      "        proxy_http_version 1.1;",
      "        proxy_set_header Upgrade $http_upgrade;",
      // Not the usual `map $http_upgrade $connection_upgrade`: a map per file would need a variable
      // per application, and a few long variable names already overflow nginx's default
      // variables_hash_bucket_size (64). Passing the client's Connection keeps websockets working.
      "        proxy_set_header Connection $http_connection;",
      "    }",
      "}",
      "",
    ].join("\n");
  }

  readAll(): Promise<Map<string, LiveRoute>> {
    return readRouteFiles(this.#confDir, FILE, (id, content) => this.#parse(id, content));
  }

  async apply(change: RouteChange): Promise<void> {
    assertRenderable(change.upsert);
    const journal = new FileJournal();
    try {
      await stageRouteFiles(
        journal,
        change,
        (id) => this.#file(id),
        (route) => this.render(route),
      );
      if (!journal.changed) return;
      await this.#nginx(["-t"], "rejected the configuration (nginx -t)");
      await this.#nginx(["-s", "reload"], "could not reload (nginx -s reload)");
    } catch (err) {
      await journal.restore().catch((restoreErr: unknown) => {
        throw new Error(`${(err as Error).message}; restoring the previous files failed too`, {
          cause: restoreErr,
        });
      });
      throw err;
    }
  }

  #file(applicationId: string): string {
    return join(this.#confDir, `relayctl-${applicationId}.conf`);
  }

  #parse(applicationId: string, content: string): LiveRoute {
    const names = /^\s*server_name\s+([^;]*);/m.exec(content)?.[1]?.trim().split(/\s+/) ?? [];
    const upstream = /^\s*proxy_pass\s+http:\/\/([^;\s]+);/m.exec(content)?.[1] ?? "";
    const live: RenderedRoute = {
      applicationId,
      fqdns: sortedFqdns(names.filter((n) => n.length > 0)),
      upstream,
    };
    if (/^\s*return 503 /m.test(content)) live.draining = true;
    return { ...live, pristine: content === this.render(live) };
  }

  async #nginx(args: string[], what: string): Promise<void> {
    try {
      await run(this.#bin, [...this.#baseArgs, ...args], { timeout: NGINX_TIMEOUT_MS });
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      const why = e.stderr?.trim() || e.message;
      throw new Error(`nginx ${what}: ${why}`, { cause: err });
    }
  }
}
