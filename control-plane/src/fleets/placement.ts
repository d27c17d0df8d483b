// Where an application runs (issue 33): its placement is an explicit list of
// servers (ids or names) or a label selector over the servers' labels
// (`region=eu,role=web`: every pair must match); null is the one server of its
// server_id, as before. A placement is resolved when a deploy starts, so a label
// change moves the application at its next deploy, not before.
import type { Knex } from "knex";
import { z } from "zod";
import { RcError } from "../errors.js";
import { isUuid } from "../http/validation.js";
import type { ServerRef } from "../servers/servers.js";
import { type Labels, labelKey, labelValue, labelsOf } from "./labels.js";

/** At most this many servers per application (a rollout's per-server rows). */
export const MAX_FLEET = 500;

const selectorPattern = /^\s*[^=,\s]+\s*=\s*[^=,\s]*\s*(,\s*[^=,\s]+\s*=\s*[^=,\s]*\s*)*$/;

export const placementSchema = z
  .union([
    z.strictObject({
      servers: z
        .array(z.string().min(1).max(128))
        .min(1)
        .max(MAX_FLEET)
        .describe("server ids or names, deployed in this order"),
    }),
    z.strictObject({
      selector: z
        .string()
        .max(1024)
        .refine((s) => selectorPattern.test(s) && selectorValid(s), {
          error: "a selector is key=value pairs separated by commas, such as region=eu,role=web",
        })
        .describe("servers whose labels match every key=value pair, deployed by name"),
    }),
  ])
  .nullable()
  .describe("the servers the application runs on; null: its server_id alone");

export type Placement = { servers: string[] } | { selector: string } | null;

/** A selector's pairs; the schema has checked its syntax. */
export function parseSelector(s: string): Labels {
  const out: Labels = {};
  for (const pair of s.split(",")) {
    const [k, v] = pair.split("=").map((p) => p.trim());
    out[k!] = v ?? "";
  }
  return out;
}

function selectorValid(s: string): boolean {
  return Object.entries(parseSelector(s)).every(
    ([k, v]) => labelKey.safeParse(k).success && labelValue.safeParse(v).success,
  );
}

export const placementOf = (column: unknown): Placement =>
  typeof column === "string" && column !== "" ? (JSON.parse(column) as Placement) : null;

export const matches = (labels: Labels, selector: Labels): boolean =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);

interface ServerLabelRow {
  id: string;
  name: string;
  labels: string | null;
}

/**
 * The servers a placement names now: the list in its order, or the selector's
 * matches by name. Unknown or removed servers of a list are a 422 naming them;
 * a selector that matches none is a 422 too (a deploy to nowhere is a mistake).
 */
export async function resolvePlacement(
  db: Knex,
  tenantId: string,
  placement: Exclude<Placement, null>,
): Promise<ServerRef[]> {
  const rows = await db("servers")
    .where({ tenant_id: tenantId, removed_at: null })
    .orderBy("name", "asc")
    .select<ServerLabelRow[]>("id", "name", "labels");
  if ("selector" in placement) {
    const want = parseSelector(placement.selector);
    const found = rows.filter((r) => matches(labelsOf(r.labels), want));
    if (found.length === 0)
      throw new RcError("RC_ERR_VALIDATION", `placement: selector '${placement.selector}' matches no server`);
    return found.slice(0, MAX_FLEET).map(({ id, name }) => ({ id, name }));
  }
  const out: ServerRef[] = [];
  const missing: string[] = [];
  for (const ref of placement.servers) {
    const r = isUuid(ref) ? rows.find((s) => s.id === ref.toLowerCase()) : rows.find((s) => s.name === ref);
    if (!r) missing.push(ref);
    else if (!out.some((s) => s.id === r.id)) out.push({ id: r.id, name: r.name });
  }
  if (missing.length > 0)
    throw new RcError(
      "RC_ERR_VALIDATION",
      `placement: unknown server(s) ${missing.map((m) => `'${m}'`).join(", ")}`,
    );
  return out;
}

/**
 * Fleet applications deployed on a server that is not their server_id: the
 * agent's route pruning (external-deploy/route-job.ts) must keep their routes.
 */
export async function fleetApplicationIdsOn(db: Knex, serverId: string): Promise<string[]> {
  const rows = await db("applications as a")
    .whereNotNull("a.placement")
    .whereNot("a.server_id", serverId)
    .whereExists((q) =>
      q
        .select(db.raw("1"))
        .from("deployments as d")
        .whereRaw("d.application_id = a.id")
        .andWhere("d.server_id", serverId),
    )
    .select<{ id: string }[]>("a.id");
  return rows.map((r) => r.id);
}

/** Whether a placement names the server now (by id or name, or by its labels). */
export function placementIncludes(placement: Exclude<Placement, null>, server: ServerLabelRow): boolean {
  if ("selector" in placement) return matches(labelsOf(server.labels), parseSelector(placement.selector));
  return placement.servers.some((ref) => ref.toLowerCase() === server.id || ref === server.name);
}

/** The tenant's fleet applications whose placement names the server now (its page, its removal). */
export async function fleetApplicationsPlacedOn(
  db: Knex,
  tenantId: string,
  serverId: string,
): Promise<{ id: string; name: string }[]> {
  const server = await db("servers")
    .where({ id: serverId, tenant_id: tenantId })
    .first<ServerLabelRow | undefined>("id", "name", "labels");
  if (!server) return [];
  const apps = await db("applications")
    .where({ tenant_id: tenantId })
    .whereNotNull("placement")
    .select<{ id: string; name: string; placement: string }[]>("id", "name", "placement");
  return apps
    .filter((a) => placementIncludes(placementOf(a.placement)!, server))
    .map(({ id, name }) => ({ id, name }));
}

/**
 * The servers other than its home one where a fleet application ever ran (its
 * deployments there): what its deletion cleans up besides the home server.
 */
export async function fleetMembersOf(db: Knex, app: { id: string; server_id: string }): Promise<ServerRef[]> {
  return db("deployments as d")
    .join("servers as s", "s.id", "d.server_id")
    .where({ "d.application_id": app.id })
    .whereNot("d.server_id", app.server_id)
    .distinct("s.id", "s.name")
    .select<ServerRef[]>();
}
