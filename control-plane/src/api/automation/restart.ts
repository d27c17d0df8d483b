// POST /api/automation/v1/restart — `<engine> restart <container_name>` on a server
// (docker, or podman where that is the agent's engine). The name is checked
// against docker's own rule here and again on the agent, and travels as one argv
// entry, never through a shell. An application's linked_container_name names its
// live container on that server (deployed ones are `<name>-<8 hex>`, new at every
// deploy, issue 29); the exact name of a container relayctl deployed there stays
// as it is. Answers like exec: 200 with the result within 60 s, else 202
// running; 409 when the agent is not connected.
import type { Knex } from "knex";
import { liveContainer } from "../../applications/live-route.js";
import { RcError } from "../../errors.js";
import { finished, running } from "../../http/answers.js";
import type { ApiContext } from "../../http/context.js";
import { AUTOMATION, AUTOMATION_API, type RouteSpec, route } from "../../http/route.js";
import { answerOutcome } from "./answer.js";
import { callerStart } from "./run-operation.js";
import { restartBody } from "../../http/operation-bodies.js";
import { findServer } from "../../servers/servers.js";

/** How long the HTTP call waits for the result (the contract's exec default). */
const WAIT_SECONDS = 60;
/** Hard deadline of the engine call on the agent; a restart waits for the container's stop timeout. */
const DEADLINE_SECONDS = 300;

export const restartRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "POST",
    url: `${AUTOMATION_API}/restart`,
    access: { credentials: AUTOMATION, scope: "restart", role: "deployer" },
    tag: "automation",
    schema: { body: restartBody },
    responses: { 200: finished, 202: running },
    handler: async (req, reply) => {
      const body = req.body;
      const server = await findServer(ctx.db, req.principal, body.server_id);
      const target = await restartTarget(ctx.db, req.principal.tenantId, server.id, body.container_name);
      const start = callerStart(req, {
        operationType: "restart",
        server,
        runId: body.run_id,
        deadlineSeconds: DEADLINE_SECONDS,
        audit: {
          container_name: target.containerName,
          ...(target.applicationId
            ? { requested_name: body.container_name, application_id: target.applicationId }
            : {}),
        },
      });
      const restart = { containerName: target.containerName, deadlineSeconds: DEADLINE_SECONDS };
      // The start goes with the job: the gateway holding the agent commits it (OperationService).
      const { op, outcome } = await ctx.ops.startAndRun(
        start,
        { $case: "restart", restart },
        WAIT_SECONDS * 1000,
      );
      return answerOutcome(reply, op, outcome);
    },
  }),
];

interface RestartTarget {
  containerName: string;
  /** Set when the name was an application's linked_container_name. */
  applicationId?: string;
}

/**
 * The container a restart's name means on the server: the exact name of a
 * container relayctl deployed there as it is; else the live container of the
 * tenant's application on that server whose linked_container_name it is; else
 * the name as given (any other container, an external deploy's included).
 */
async function restartTarget(
  db: Knex,
  tenantId: string,
  serverId: string,
  name: string,
): Promise<RestartTarget> {
  const deployed = await db("deployments")
    .where({ tenant_id: tenantId, server_id: serverId, container_name: name })
    .first("id");
  if (deployed) return { containerName: name };
  const apps = await db("applications")
    .where({ tenant_id: tenantId, server_id: serverId, linked_container_name: name })
    .select<{ id: string }[]>("id");
  const live: RestartTarget[] = [];
  for (const app of apps) {
    const c = await liveContainer(db, { id: app.id, server_id: serverId });
    if (c) live.push({ containerName: c.container_name, applicationId: app.id });
  }
  if (live.length > 1)
    throw new RcError(
      "RC_ERR_VALIDATION",
      `container_name: '${name}' is the linked container name of ${live.length} applications on this server; name the container itself`,
    );
  return live[0] ?? { containerName: name };
}
