// GET /api/automation/v1/servers — the servers a caller of the Automation API may
// act on, by id and name: the key's server scope (all of the tenant's when it has
// none), removed servers left out. So `relayctl exec web-1` works with an rca_
// key, which cannot read the organization's server list (GET /api/servers).
import { z } from "zod";
import type { ApiContext } from "../../http/context.js";
import { AUTOMATION, AUTOMATION_API, type RouteSpec, route } from "../../http/route.js";

const serverNames = z.looseObject({
  servers: z.array(z.looseObject({ id: z.string().describe("UUID"), name: z.string() })),
});

export const serversRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "GET",
    url: `${AUTOMATION_API}/servers`,
    access: { credentials: AUTOMATION },
    tag: "automation",
    summary: "the servers in the caller's scope, by id and name",
    responses: { 200: serverNames },
    handler: async (req) => {
      const p = req.principal;
      const query = ctx.db("servers").where({ tenant_id: p.tenantId, removed_at: null });
      if (p.servers.length > 0) query.whereIn("id", p.servers);
      const rows: { id: string; name: string }[] = await query.orderBy("name").select("id", "name");
      return { servers: rows };
    },
  }),
];
