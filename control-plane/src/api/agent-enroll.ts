// POST /api/agent/enroll — an agent trades a single-use, expiring join token
// (rjt_) for its long-lived credential (rag_, stored hashed) and the gateway URLs
// (auth/agent-credentials.ts). Enrolling again under a name that exists rotates
// that server's credential.
import { z } from "zod";
import { enrollAgent } from "../auth/agent-credentials.js";
import { enrolled } from "../http/answers.js";
import { labelsSchema } from "../fleets/labels.js";
import type { ApiContext } from "../http/context.js";
import { type RouteSpec, route } from "../http/route.js";

// Not strict: agents of other versions may send fields this one does not know.
const bodySchema = z.object({
  join_token: z.string().min(1).max(256),
  hostname: z.string().max(255).optional(),
  agent_version: z.string().max(64).optional(),
  /** `relayctl-agent enroll --label k=v` (fleets/labels.ts). */
  labels: labelsSchema.optional(),
});

export const enrollRoutes = (ctx: ApiContext, gatewayUrls: () => string[]): RouteSpec[] => [
  route({
    method: "POST",
    url: "/api/agent/enroll",
    access: { public: "the join token in the body: single use and expiring, checked by the handler" },
    tag: "agents",
    schema: { body: bodySchema },
    responses: { 201: enrolled },
    handler: async (req, reply) => {
      const { join_token: token, hostname, agent_version, labels } = req.body;
      const enrolled = await enrollAgent(ctx.db, { token, hostname, agent_version, labels, ip: req.ip });
      return reply.status(201).send({ ...enrolled, gateway_urls: gatewayUrls() });
    },
  }),
];
