// POST /api/automation/v1/registry-auth/login and /logout — a server's container
// engine logs in to (out of) a registry.
//
// login: always 202 running; the stored credential is decrypted here and its
//   password rides only on the job (bus → gateway → agent stdin). It is never
//   written to the operation, the audit trail or a log. 409 when not connected.
// logout: synchronous and never 5xx for a failed logout: an agent that is not
//   connected, or a logout that fails, is a `completed` operation with a
//   non-zero exit_code and the reason in stderr (clients treat it as a warning).
import type { FastifyReply, FastifyRequest } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { requireOperation } from "../../auth/automation-key.js";
import type { JobEnvelope } from "../../bus/job-bus.js";
import { RcError } from "../../errors.js";
import { dispatchAndWait } from "../../operations/dispatch.js";
import { createOperation, finishOperation } from "../../operations/store.js";
import { openCredential, requireMasterKey, resolveOr422 } from "../../registry/credentials.js";
import type { ApiContext } from "../context.js";
import { runContextSchema, runIdSchema, uuidSchema } from "./schemas.js";
import { type ServerRef, findServer } from "./servers.js";

/** Engine login/logout deadline on the agent. */
const DEADLINE_SECONDS = 60;
/** Logout answers within this; the agent kills the engine at DEADLINE_SECONDS. */
const LOGOUT_WAIT_MS = (DEADLINE_SECONDS + 10) * 1000;

const loginSchema = z.strictObject({
  server_id: uuidSchema,
  credential_id: uuidSchema,
  run_id: runIdSchema.optional(),
  run_context: runContextSchema.optional(),
});
type LoginBody = z.infer<typeof loginSchema>;

const logoutSchema = z.strictObject({
  server_id: uuidSchema,
  registry_url: z.string().max(512),
  run_id: runIdSchema.optional(),
});
type LogoutBody = z.infer<typeof logoutSchema>;

const scope = (operation: string) => async (req: FastifyRequest) =>
  requireOperation(req.principal, operation);

function auditBase(req: FastifyRequest, server: ServerRef, runId: string | undefined) {
  return {
    server_id: server.id,
    server_name: server.name,
    key_id: req.principal.keyId,
    key_name: req.principal.keyName,
    run_id: runId ?? null,
    ip: req.ip,
  };
}

export const registryAuthRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.post<{ Body: LoginBody }>(
      "/registry-auth/login",
      { schema: { body: loginSchema }, preValidation: scope("registry_login") },
      async (req, reply) => {
        const body = req.body;
        const p = req.principal;
        const server = await findServer(ctx.db, p, body.server_id);
        const masterKey = requireMasterKey(ctx.config.masterKey);
        const credential = await openCredential(ctx.db, masterKey, p.tenantId, body.credential_id);
        if (p.allowedCredentialIds.length > 0 && !p.allowedCredentialIds.includes(credential.id)) {
          throw new RcError(
            "RC_ERR_FORBIDDEN",
            `registry credential '${credential.name}' is outside this key's scope`,
          );
        }
        const { id } = await createOperation(ctx.db, {
          tenantId: p.tenantId,
          serverId: server.id,
          operationType: "registry_login",
          keyId: p.keyId,
          runId: body.run_id ?? null,
          leaseMs: ctx.config.leaseMs,
          deadlineAt: Date.now() + DEADLINE_SECONDS * 1000,
          audit: {
            ...auditBase(req, server, body.run_id),
            credential_id: credential.id,
            credential_name: credential.name,
            registry_url: credential.registry_url,
            registry_type: credential.registry_type,
            username: credential.username,
            run_context: body.run_context ?? null,
          },
        });
        const job: JobEnvelope = {
          operation_id: id,
          registry_login: {
            registry: credential.registry_url,
            username: credential.username,
            password: credential.password,
            deadline_seconds: DEADLINE_SECONDS,
          },
        };
        // Always asynchronous: dispatch (409 when not connected), wait for nothing.
        await dispatchAndWait(ctx.db, ctx.bus, { operationId: id, server }, job, 0);
        return reply.status(202).send({
          operation_id: id,
          status: "running",
          registry_url: credential.registry_url,
          registry_type: credential.registry_type,
        });
      },
    );

    app.post<{ Body: LogoutBody }>(
      "/registry-auth/logout",
      { schema: { body: logoutSchema }, preValidation: scope("registry_logout") },
      async (req, reply) => {
        const body = req.body;
        const resolved = resolveOr422(body.registry_url);
        const server = await findServer(ctx.db, req.principal, body.server_id);
        const { id } = await createOperation(ctx.db, {
          tenantId: req.principal.tenantId,
          serverId: server.id,
          operationType: "registry_logout",
          keyId: req.principal.keyId,
          runId: body.run_id ?? null,
          leaseMs: ctx.config.leaseMs,
          deadlineAt: Date.now() + DEADLINE_SECONDS * 1000,
          audit: { ...auditBase(req, server, body.run_id), ...resolved },
        });
        const job: JobEnvelope = {
          operation_id: id,
          registry_logout: { registry: resolved.registry_url, deadline_seconds: DEADLINE_SECONDS },
        };
        return logout(ctx, reply, { operationId: id, server }, job);
      },
    );
  };

/** Runs the logout job; anything that keeps it from running is a completed, non-zero result. */
async function logout(
  ctx: ApiContext,
  reply: FastifyReply,
  target: { operationId: string; server: ServerRef },
  job: JobEnvelope,
) {
  const id = target.operationId;
  const notRun = async (reason: string) => {
    const result = { exit_code: -1, stdout: "", stderr: reason, duration_ms: 0 };
    await finishOperation(ctx.db, id, { status: "completed", ...result });
    return reply.status(200).send({ operation_id: id, status: "completed", ...result });
  };
  let waiter: Awaited<ReturnType<ApiContext["bus"]["awaitDone"]>>;
  try {
    waiter = await ctx.bus.awaitDone(id);
  } catch {
    return notRun("logout not run: job bus unavailable");
  }
  let timer: NodeJS.Timeout | undefined;
  try {
    const dispatched = await ctx.bus.dispatch(target.server.id, job).catch(() => "bus_unavailable" as const);
    if (dispatched === "not_connected") return notRun(`server '${target.server.name}' is not connected`);
    if (dispatched === "bus_unavailable") return notRun("logout not run: job bus unavailable");
    const timeout = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), LOGOUT_WAIT_MS);
    });
    const event = await Promise.race([waiter.done, timeout]);
    if (!event) return reply.status(202).send({ operation_id: id, status: "running" });
    const result = event.result ?? (await ctx.readResult(id));
    return reply.status(200).send({ operation_id: id, status: event.status, ...result });
  } finally {
    clearTimeout(timer);
    waiter.cancel();
  }
}
