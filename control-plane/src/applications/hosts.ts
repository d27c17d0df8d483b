// The hostnames an application's route carries: its bound domain names
// (`fqdns`, stored) and, when RELAYCTL_APPS_URL is set, its default hostname
// (derived from its name, never stored, so a new template applies to every
// application at once). A domain routes to one application per server, so a
// default hostname never steals one another application holds:
//   - a domain bound in another application's `fqdns` on the server wins;
//   - between two names that map to one label ("My App", "my-app"), the older
//     application (created first; then the smaller id) keeps it;
// the other application simply has no default hostname (its `url` falls back to
// its first domain). Writes that would make such a clash are refused with 409
// (checkDefaultHost); these rules settle what older rows or a new template made.
import type { Knex } from "knex";
import { RcError } from "../errors.js";
import { type AppsUrl, applicationUrls, templateHostname } from "./app-url.js";

/** What the rules read of an application. */
export interface HostApp {
  id: string;
  name: string;
  server_id: string;
  fqdns: string;
  created_at: number;
}

type Peer = Pick<HostApp, "id" | "name" | "created_at">;

const older = (a: Peer, b: Peer) =>
  Number(a.created_at) < Number(b.created_at) ||
  (Number(a.created_at) === Number(b.created_at) && a.id < b.id);

/** The other application on the server whose default hostname `host` is and which is older than `app`. */
function olderHolder(apps: AppsUrl, app: Peer, peers: Peer[], host: string): Peer | undefined {
  return peers.find((p) => p.id !== app.id && older(p, app) && templateHostname(apps, p) === host);
}

async function peersOf(db: Knex, serverId: string): Promise<Peer[]> {
  return db("applications").where({ server_id: serverId }).select<Peer[]>("id", "name", "created_at");
}

async function boundElsewhere(db: Knex, app: HostApp, host: string): Promise<boolean> {
  const row = await db("application_fqdns")
    .where({ server_id: app.server_id, fqdn: host })
    .whereNot({ application_id: app.id })
    .first("application_id");
  return Boolean(row);
}

/**
 * The default hostname of each application (null: no template, or another application holds it),
 * in order. One read of each server's peers (unless given) and one of the hostnames bound on those
 * servers for all of them: a sync of 100 applications is two reads, not two per application.
 */
export async function defaultHostsOf(
  db: Knex,
  apps: AppsUrl | undefined,
  rows: HostApp[],
  peersByServer = new Map<string, Peer[]>(),
): Promise<(string | null)[]> {
  if (!apps) return rows.map(() => null);
  const hosts = new Map<HostApp, string>();
  for (const row of rows) {
    const host = templateHostname(apps, row);
    if (!host) continue;
    if (!peersByServer.has(row.server_id)) peersByServer.set(row.server_id, await peersOf(db, row.server_id));
    if (!olderHolder(apps, row, peersByServer.get(row.server_id)!, host)) hosts.set(row, host);
  }
  if (hosts.size > 0) {
    // Both lists may pair a server with another server's hostname: the match below is per pair.
    const bound = await db("application_fqdns")
      .whereIn("server_id", [...new Set([...hosts.keys()].map((r) => r.server_id))])
      .whereIn("fqdn", [...new Set(hosts.values())])
      .select<{ application_id: string; server_id: string; fqdn: string }[]>(
        "application_id",
        "server_id",
        "fqdn",
      );
    for (const [row, host] of hosts) {
      if (bound.some((b) => b.server_id === row.server_id && b.fqdn === host && b.application_id !== row.id))
        hosts.delete(row);
    }
  }
  return rows.map((row) => hosts.get(row) ?? null);
}

/** The application's default hostname, or null (no template, or another application holds it). */
export async function defaultHostOf(
  db: Knex,
  apps: AppsUrl | undefined,
  app: HostApp,
  peers?: Peer[],
): Promise<string | null> {
  const given = peers ? new Map([[app.server_id, peers]]) : undefined;
  return (await defaultHostsOf(db, apps, [app], given))[0]!;
}

/** Every hostname of each application's route, sorted (the agent's signature sorts them too). */
export async function routeFqdnsOf(
  db: Knex,
  apps: AppsUrl | undefined,
  rows: HostApp[],
): Promise<string[][]> {
  const hosts = await defaultHostsOf(db, apps, rows);
  return rows.map((row, i) => {
    const host = hosts[i];
    return [...new Set([...(host ? [host] : []), ...(JSON.parse(row.fqdns) as string[])])].sort();
  });
}

/** Every hostname of the application's route, sorted (the agent's signature sorts them too). */
export async function routeFqdns(db: Knex, apps: AppsUrl | undefined, app: HostApp): Promise<string[]> {
  return (await routeFqdnsOf(db, apps, [app]))[0]!;
}

/** `url` and `urls` of one application. */
export async function urlsOf(db: Knex, apps: AppsUrl | undefined, app: HostApp, peers?: Peer[]) {
  return applicationUrls(apps, await defaultHostOf(db, apps, app, peers), JSON.parse(app.fqdns));
}

/** `url` and `urls` of many applications, by id (one read of the peers per server). */
export async function urlsOfMany(db: Knex, apps: AppsUrl | undefined, rows: HostApp[]) {
  const peers = new Map<string, Peer[]>();
  const out = new Map<string, { url: string | null; urls: string[] }>();
  for (const row of rows) {
    if (apps && !peers.has(row.server_id)) peers.set(row.server_id, await peersOf(db, row.server_id));
    out.set(row.id, await urlsOf(db, apps, row, peers.get(row.server_id)));
  }
  return out;
}

/**
 * Refuses (409) a write that would give a hostname two applications on one
 * server: the application's default hostname held by another one, or one of its
 * domains that is another application's default hostname. Runs in the write's
 * transaction, only for what the write changes (`name`: its name or server,
 * `fqdns`: its domains or server), so a clash older rows made never blocks an
 * unrelated change.
 */
export async function checkDefaultHost(
  trx: Knex.Transaction,
  apps: AppsUrl | undefined,
  app: HostApp,
  check: { name: boolean; fqdns: boolean },
): Promise<void> {
  if (!apps || !(check.name || check.fqdns)) return;
  const peers = await peersOf(trx, app.server_id);
  const host = check.name ? templateHostname(apps, app) : undefined;
  const holder = host ? olderHolder(apps, app, peers, host) : undefined;
  if (host && holder) {
    throw new RcError(
      "RC_ERR_FQDN_TAKEN",
      `the name '${app.name}' gives the hostname '${host}' (RELAYCTL_APPS_URL), which application '${holder.name}' already has on this server: choose another name`,
    );
  }
  if (host && (await boundElsewhere(trx, app, host))) {
    throw new RcError(
      "RC_ERR_FQDN_TAKEN",
      `the name '${app.name}' gives the hostname '${host}' (RELAYCTL_APPS_URL), which another application on this server has among its fqdns: choose another name`,
    );
  }
  if (!check.fqdns) return;
  const fqdns = new Set(JSON.parse(app.fqdns) as string[]);
  const taken = peers.find((p) => p.id !== app.id && fqdns.has(templateHostname(apps, p) ?? ""));
  if (taken) {
    throw new RcError(
      "RC_ERR_FQDN_TAKEN",
      `domain '${templateHostname(apps, taken)}' is the default hostname of application '${taken.name}' on this server`,
    );
  }
}
