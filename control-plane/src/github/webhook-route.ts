// POST /webhooks/github: GitHub's deliveries to the App. The body is taken as
// raw bytes (`accepts: "raw-json"`, up to GitHub's 25 MB cap)
// and its X-Hub-Signature-256 checked over exactly those bytes before anything
// else; a missing or wrong one is 401 and nothing is recorded. A good one is
// recorded (deliveries.ts) and answered 202 at once — GitHub gives up after
// 10 s, and a restart must lose nothing — then processed from the record. A
// redelivery (same X-GitHub-Delivery) is 202 and does nothing again.
import { RcError } from "../errors.js";
import { type RouteSpec, route } from "../http/route.js";
import type { Payload } from "./context.js";
import { recordDelivery } from "./deliveries.js";
import type { GitHubIntegration } from "./integration.js";

/** GitHub caps webhook payloads at 25 MB. */
export const WEBHOOK_BODY_LIMIT = 25 * 1024 * 1024;

const header = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

export const webhookRoutes = (github: GitHubIntegration | undefined): RouteSpec[] => [
  route({
    method: "POST",
    url: "/webhooks/github",
    access: { public: "GitHub's X-Hub-Signature-256 over the raw body, checked by the handler first" },
    tag: "github",
    accepts: "raw-json",
    options: { bodyLimit: WEBHOOK_BODY_LIMIT },
    handler: async (req, reply) => {
      if (!github) throw new RcError("RC_ERR_GITHUB_UNCONFIGURED");
      const raw = req.body as Buffer | undefined;
      if (
        !Buffer.isBuffer(raw) ||
        !(await github.app.verify(raw, header(req.headers["x-hub-signature-256"])))
      )
        throw new RcError("RC_ERR_WEBHOOK_SIGNATURE");
      const event = header(req.headers["x-github-event"]);
      const id = header(req.headers["x-github-delivery"]);
      if (!event || !id || id.length > 64)
        throw new RcError("RC_ERR_BAD_REQUEST", "X-GitHub-Event and X-GitHub-Delivery are required");
      let payload: Payload;
      try {
        payload = JSON.parse(raw.toString("utf8"));
      } catch {
        throw new RcError("RC_ERR_BAD_REQUEST", "the delivery's body is not JSON");
      }
      // Every GitHub event is a JSON object; anything else would fail below (a 500).
      if (payload === null || typeof payload !== "object" || Array.isArray(payload))
        throw new RcError("RC_ERR_BAD_REQUEST", "the delivery's body is not a JSON object");
      const idOf = (o: unknown) => {
        const n = Number((o as { id?: unknown } | null | undefined)?.id);
        return Number.isSafeInteger(n) && n > 0 ? n : null;
      };
      const recorded = await recordDelivery(github.ctx.db, {
        id,
        event: event.slice(0, 64),
        action: typeof payload.action === "string" ? payload.action.slice(0, 64) : null,
        installationId: idOf(payload.installation),
        repositoryId: idOf(payload.repository),
        payload: raw,
      });
      if (recorded) github.processor.nudge();
      return reply.status(202).send({ delivery_id: id, duplicate: !recorded });
    },
  }),
];
