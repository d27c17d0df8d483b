// Fleets' own routes (management API, docs/fleets.md):
//   PUT /api/servers/{id}/labels                       (owner) replace a server's labels
//   GET /api/applications/{id}/rollouts                the application's rollouts, newest first
//   GET /api/applications/{id}/rollouts/{rollout_id}   one, with its per-server states
// Deploys and rollbacks of a fleet start through the deploy routes (deploy.ts).
import { z } from "zod";
import { getApplication } from "../applications/store.js";
import { auditActor } from "../auth/principal.js";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { uuidSchema } from "../http/schemas.js";
import { queryInt } from "../http/validation.js";
import { labelsSchema, setServerLabels } from "./labels.js";
import { getRollout, listRollouts } from "./store.js";

const o = z.looseObject;
const iso = z.string().describe("ISO 8601 date-time (UTC)");

const rolloutServer = o({
  server_id: z.string(),
  server_name: z.string(),
  batch: z.int(),
  state: z
    .string()
    .describe("pending, deploying, succeeded, failed, rolling_back, rolled_back, rollback_failed or skipped"),
  deployment_id: z.string().nullable(),
  rollback_deployment_id: z.string().nullable(),
  failed_step: z.string().nullable(),
  detail: z.string().nullable(),
  updated_at: iso,
}).meta({ id: "RolloutServer" });

const rollout = o({
  rollout_id: z.string(),
  application_id: z.string(),
  operation_id: z.string(),
  kind: z.string().describe("deploy or rollback"),
  status: z.string().describe("running, succeeded, halted or failed"),
  detail: z.string().nullable(),
  strategy: o({}),
  run_id: z.string().nullable(),
  created_at: iso,
  finished_at: iso.nullable(),
  deadline_at: iso,
  servers: z.array(rolloutServer),
}).meta({ id: "Rollout" });

const labelsBody = z.strictObject({ labels: labelsSchema });
const labelsAnswer = o({ server_id: z.string(), labels: z.record(z.string(), z.string()) }).meta({
  id: "ServerLabels",
});

export const fleetRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "PUT",
    url: "/api/servers/:server_id/labels",
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    summary: "Replace a server's labels (fleet placement selectors match them)",
    schema: { params: z.object({ server_id: uuidSchema }), body: labelsBody },
    responses: { 200: labelsAnswer },
    handler: async (req) =>
      setServerLabels(
        ctx.db,
        req.principal.tenantId,
        req.params.server_id,
        req.body.labels,
        auditActor(req.principal, req.ip),
      ),
  }),
  route({
    method: "GET",
    url: "/api/applications/:id/rollouts",
    access: { credentials: MANAGEMENT },
    tag: "management",
    summary: "A fleet application's rollouts, newest first, with their servers' states",
    schema: {
      params: z.object({ id: z.string() }),
      querystring: z.strictObject({ limit: queryInt(1, 100).optional() }),
    },
    responses: { 200: o({ rollouts: z.array(rollout) }).meta({ id: "RolloutList" }) },
    handler: async (req) => {
      const app = await getApplication(ctx.db, req.principal.tenantId, req.params.id);
      return { rollouts: await listRollouts(ctx.db, app.id, req.query.limit ?? 20) };
    },
  }),
  route({
    method: "GET",
    url: "/api/applications/:id/rollouts/:rollout_id",
    access: { credentials: MANAGEMENT },
    tag: "management",
    summary: "One rollout with its per-server states",
    schema: { params: z.object({ id: z.string(), rollout_id: z.string() }) },
    responses: { 200: rollout },
    handler: async (req) => {
      const app = await getApplication(ctx.db, req.principal.tenantId, req.params.id);
      return getRollout(ctx.db, app.id, req.params.rollout_id);
    },
  }),
];
