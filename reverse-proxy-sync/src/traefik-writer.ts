// Traefik through its file provider: one YAML file per application
// (relayctl-<application id>.yml) in the directory Traefik watches, with a
// router (Host rules; wildcards as Traefik v3 HostRegexp) and a load-balanced
// service. Files are replaced atomically so Traefik never reads half a file; a
// failed apply puts back every file it had already replaced.
import { join } from "node:path";
import { Document, parse } from "yaml";
import type { LiveRoute, RouteChange, RouteWriter } from "./route-writer.js";
import { type RenderedRoute, sortedFqdns } from "./route.js";
import {
  FileJournal,
  assertRenderable,
  readRouteFiles,
  routeFilePattern,
  stageRouteFiles,
} from "./writer-support.js";

export interface TraefikWriterOptions {
  /** The file provider's directory. */
  dir: string;
  /** @default ["web"] */
  entryPoints?: string[];
}

const FILE = routeFilePattern(".yml");
const HOST = /^Host\(`([^`]*)`\)$/;
// The exact form hostRule() writes for `*.<domain>` (Traefik v3 HostRegexp takes a Go regexp).
const WILDCARD = /^HostRegexp\(`\^\[a-z0-9-\]\+\\\.((?:[a-z0-9-]+\\\.)*[a-z0-9-]+)\$`\)$/;

function hostRule(fqdn: string): string {
  if (!fqdn.startsWith("*.")) return `Host(\`${fqdn}\`)`;
  return `HostRegexp(\`^[a-z0-9-]+\\.${fqdn.slice(2).replaceAll(".", "\\.")}$\`)`;
}

/** Domain names back from a rule this writer wrote; undefined for any other rule. */
export function fqdnsOfRule(rule: string): string[] | undefined {
  const out: string[] = [];
  for (const part of rule.split(" || ")) {
    const host = HOST.exec(part)?.[1];
    const wild = WILDCARD.exec(part)?.[1];
    if (host !== undefined) out.push(host);
    else if (wild !== undefined) out.push(`*.${wild.replaceAll("\\.", ".")}`);
    else return undefined;
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** obj.a.b.c of parsed YAML, or undefined anywhere along the way. */
function dig(value: unknown, ...keys: string[]): unknown {
  let at = value;
  for (const k of keys) at = isObject(at) ? at[k] : undefined;
  return at;
}

export class TraefikWriter implements RouteWriter {
  readonly kind = "traefik" as const;
  readonly #dir: string;
  readonly #entryPoints: string[];

  constructor(opts: TraefikWriterOptions) {
    this.#dir = opts.dir;
    this.#entryPoints = opts.entryPoints ?? ["web"];
  }

  /** The file content this writer produces for one application. */
  render(route: RenderedRoute): string {
    const name = `relayctl-${route.applicationId}`;
    const doc = new Document({
      http: {
        routers: {
          [name]: {
            rule: route.fqdns.map(hostRule).join(" || "),
            service: name,
            entryPoints: this.#entryPoints,
          },
        },
        services: { [name]: { loadBalancer: { servers: [{ url: `http://${route.upstream}` }] } } },
      },
    });
    doc.commentBefore = ` relayctl route for application ${route.applicationId}: written by the relayctl agent, edits are undone`;
    return doc.toString();
  }

  readAll(): Promise<Map<string, LiveRoute>> {
    return readRouteFiles(this.#dir, FILE, (id, content) => this.#parse(id, content));
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
    } catch (err) {
      // Traefik may already have loaded some of the new files: put them all back so it sees one state.
      await journal.restore().catch(() => undefined);
      throw err;
    }
  }

  #file(applicationId: string): string {
    return join(this.#dir, `relayctl-${applicationId}.yml`);
  }

  #parse(applicationId: string, content: string): LiveRoute {
    const name = `relayctl-${applicationId}`;
    let doc: unknown;
    try {
      doc = parse(content);
    } catch {
      return { applicationId, fqdns: [], upstream: "", pristine: false };
    }
    const rule = dig(doc, "http", "routers", name, "rule");
    const servers = dig(doc, "http", "services", name, "loadBalancer", "servers");
    const url = Array.isArray(servers) ? dig(servers[0], "url") : undefined;
    const fqdns = typeof rule === "string" ? (fqdnsOfRule(rule) ?? []) : [];
    const upstream = typeof url === "string" && url.startsWith("http://") ? url.slice("http://".length) : "";
    const live = { applicationId, fqdns: sortedFqdns(fqdns), upstream };
    return { ...live, pristine: content === this.render(live) };
  }
}
