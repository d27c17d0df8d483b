// A change of an application's hostnames (its fqdns, or a new name that gives a
// new default hostname) takes effect on its route at once: when it has a live
// container (the newest finished deployment on its server that started one;
// retire removed the ones before it), the route goes to its agent as a
// route-sync job (audited like every operation), and the caller learns the
// outcome. An agent that is away or slow never fails the change (it is stored
// first): a job on the agent's stream still runs when the answer has gone, and
// an agent that is not connected gets the hosts with the application's next
// deployment or route sync, which read them from the same place (hosts.ts).
import type { ApiContext } from "../http/context.js";
import { runRouteJob } from "../external-deploy/route-job.js";
import { type HostApp, routeFqdns } from "./hosts.js";

/** Like DELETE's route removal: long enough for a Caddy load, short for an HTTP call. */
const WAIT_MS = 15_000;

export interface RouteChange {
  /** applied: the proxy serves the hosts now; failed: the agent refused (detail says why);
   *  pending: not reported yet (agent away or slow); not_live: nothing runs to route to. */
  status: "applied" | "failed" | "pending" | "not_live";
  detail: string;
  operation_id: string | null;
  fqdns: string[];
}

export interface LiveApp extends HostApp {
  tenant_id: string;
  container_port: number;
}

interface Live {
  container_name: string;
  image: string | null;
}

/** The application's live container on its server (also what a restart by application name means). */
export async function liveContainer(
  db: ApiContext["db"],
  app: { id: string; server_id: string },
): Promise<Live | undefined> {
  return db("deployments as d")
    .join("operations as o", "o.id", "d.operation_id")
    .where({ "d.application_id": app.id, "d.server_id": app.server_id, "o.status": "completed" })
    .whereNotNull("d.container_name")
    .orderBy("d.seq", "desc")
    .first<Live | undefined>("d.container_name", "d.image");
}

export async function applyRoute(ctx: ApiContext, app: LiveApp, ip: string): Promise<RouteChange> {
  const fqdns = await routeFqdns(ctx.db, ctx.config.appsUrl, app);
  const live = await liveContainer(ctx.db, app);
  if (!live) {
    const detail = "the application has no live container: its next deployment routes these hostnames";
    return { status: "not_live", detail, operation_id: null, fqdns };
  }
  const server = await ctx
    .db("servers")
    .where({ id: app.server_id })
    .first<{ id: string; name: string }>("id", "name");
  const outcome = await runRouteJob(
    ctx,
    {
      tenantId: app.tenant_id,
      server,
      keyId: null,
      runId: null,
      ip,
      audit: { reason: "application hostnames changed", application_id: app.id },
      // No hostname left: the route comes off the proxy (the container keeps running).
      routes:
        fqdns.length === 0
          ? []
          : [
              {
                application_id: app.id,
                container_name: live.container_name,
                // The container's port: the agent's port check finds where it is published.
                container_port: Number(app.container_port),
                image_tag: live.image ?? "",
                fqdns,
              },
            ],
      remove: fqdns.length === 0 ? [app.id] : [],
    },
    WAIT_MS,
  );
  const operation_id = outcome.operationId;
  if (outcome.state === "running") {
    const detail = `${outcome.reason}: the agent applies the route when it gets to it`;
    return { status: "pending", detail, operation_id, fqdns };
  }
  if (outcome.state === "not_connected") {
    const detail = `${outcome.reason}: the change is stored, and the application's next deployment or route sync applies it`;
    return { status: "pending", detail, operation_id, fqdns };
  }
  if (outcome.state === "failed") return { status: "failed", detail: outcome.reason, operation_id, fqdns };
  if (fqdns.length === 0) {
    return { status: "applied", detail: "the route was removed (no hostnames left)", operation_id, fqdns };
  }
  const r = outcome.report.routes.find((x) => x.application_id === app.id);
  if (!r || r.status === "failed") {
    const detail = `the ${outcome.report.proxy} proxy did not take the route: ${r?.error ?? "no outcome reported"}`;
    return { status: "failed", detail, operation_id, fqdns };
  }
  return {
    status: "applied",
    detail: `${r.fqdns.join(", ")} -> ${r.upstream} (${r.status})`,
    operation_id,
    fqdns,
  };
}
