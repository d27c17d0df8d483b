// POST /api/automation/v1/reboot — reboot a server (DESIGN.md "Operations").
// With a cloud provider binding the provider's API reboots it (reboot/providers/);
// otherwise the agent acks and runs its reboot command. Either way the answer is
// 202 running, and the operation completes only when the agent says Hello with a
// new boot id (reboot/completion.ts), or ends `timeout` at
// RELAYCTL_REBOOT_TIMEOUT_SECONDS. A provider that refuses ends the operation
// `failed` with the provider's message in stderr (the HTTP answer is still 202:
// the provider is called after the operation is recorded, and its refusal is the
// operation's outcome, not an error of this API). No agent and no binding: 409.
import { z } from "zod";
import { running } from "../../http/answers.js";
import { AUTOMATION, AUTOMATION_API, type RouteSpec, route } from "../../http/route.js";
import { type OpenedBinding, openBinding } from "../../reboot/bindings.js";
import { currentBootId } from "../../reboot/completion.js";
import { cloudProvider } from "../../reboot/providers/index.js";
import type { ApiContext } from "../../http/context.js";
import { notRunError } from "./answer.js";
import { startForCaller } from "./run-operation.js";
import { runIdSchema, uuidSchema } from "../../http/schemas.js";
import { findServer } from "../../servers/servers.js";

const bodySchema = z.strictObject({ server_id: uuidSchema, run_id: runIdSchema.optional() });

export const rebootRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "POST",
    url: `${AUTOMATION_API}/reboot`,
    access: { credentials: AUTOMATION, scope: "reboot", role: "owner" },
    tag: "automation",
    schema: { body: bodySchema },
    responses: { 202: running },
    handler: async (req, reply) => {
      const server = await findServer(ctx.db, req.principal, req.body.server_id);
      const binding = await openBinding(ctx.db, ctx.config.masterKey, server.id);
      const op = await startForCaller(ctx, req, {
        operationType: "reboot",
        server,
        runId: req.body.run_id,
        deadlineSeconds: ctx.config.rebootTimeoutSeconds,
        leased: false, // the agent cannot heartbeat while its machine restarts
        preBootId: await currentBootId(ctx.db, server.id),
        audit: {
          via: binding ? binding.provider : "agent",
          ...(binding ? { provider_server_id: binding.provider_server_id } : {}),
        },
      });
      if (binding) {
        void providerReboot(ctx, op.id, binding).catch((err) =>
          req.log.error({ err, operation_id: op.id }, "provider reboot bookkeeping failed"),
        );
      } else {
        const outcome = await ctx.ops.run(op, { $case: "reboot", reboot: { reason: "api" } }, 0);
        if (outcome.state === "not_run") throw notRunError(op, outcome);
      }
      return reply.status(202).send({ operation_id: op.id, status: "running" });
    },
  }),
];

/** Calls the provider; on refusal ends the operation `failed` with the provider's message. */
async function providerReboot(ctx: ApiContext, operationId: string, binding: OpenedBinding): Promise<void> {
  const started = Date.now();
  let failure: string;
  if (binding.token === undefined) {
    failure = ctx.config.masterKey
      ? "the stored provider token does not decrypt with the current RELAYCTL_MASTER_KEY: bind the server again"
      : "the control plane has no RELAYCTL_MASTER_KEY to open the stored provider token";
  } else {
    try {
      await cloudProvider(binding.provider, ctx.config.providerUrls).reboot(
        binding.provider_server_id,
        binding.token,
      );
      return; // accepted: the agent's next Hello with a new boot id completes it
    } catch (err) {
      failure = (err as Error).message;
    }
  }
  await ctx.ops.fail(operationId, "failed", failure, Date.now() - started);
}
