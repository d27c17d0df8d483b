// POST /api/automation/v1/registry-auth/login and /logout — a server's container
// engine logs in to (out of) a registry.
//
// login: always 202 running; the stored credential is decrypted here and its
//   password rides only on the job (bus → gateway → agent stdin). It is never
//   written to the operation, the audit trail or a log. 409 when not connected.
// logout: synchronous and never 5xx for a failed logout: an agent that is not
//   connected, or a logout that fails, is a `completed` operation with a
//   non-zero exit_code and the reason in stderr (clients treat it as a warning).
import { z } from "zod";
import { RcError } from "../../errors.js";
import { openCredential, requireMasterKey, resolveOr422 } from "../../registry/credentials.js";
import { finished, registryLoginStarted, running } from "../../http/answers.js";
import type { ApiContext } from "../../http/context.js";
import { AUTOMATION, AUTOMATION_API, type RouteSpec, route } from "../../http/route.js";
import { notRunError } from "./answer.js";
import { callerStart, startForCaller } from "./run-operation.js";
import { runContextSchema, runIdSchema, uuidSchema } from "../../http/schemas.js";
import { findServer } from "../../servers/servers.js";

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

const logoutSchema = z.strictObject({
  server_id: uuidSchema,
  registry_url: z.string().max(512),
  run_id: runIdSchema.optional(),
});

export const registryAuthRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "POST",
    url: `${AUTOMATION_API}/registry-auth/login`,
    access: { credentials: AUTOMATION, scope: "registry_login", role: "owner", grant: "exec" },
    tag: "automation",
    schema: { body: loginSchema },
    responses: { 202: registryLoginStarted },
    handler: async (req, reply) => {
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
      const op = await startForCaller(ctx, req, {
        operationType: "registry_login",
        server,
        runId: body.run_id,
        deadlineSeconds: DEADLINE_SECONDS,
        audit: {
          credential_id: credential.id,
          credential_name: credential.name,
          registry_url: credential.registry_url,
          registry_type: credential.registry_type,
          username: credential.username,
          run_context: body.run_context ?? null,
        },
      });
      // The password rides only on the job: never the operation row, the audit trail or a log.
      const registryLogin = {
        registry: credential.registry_url,
        username: credential.username,
        password: credential.password,
        deadlineSeconds: DEADLINE_SECONDS,
      };
      // Always asynchronous: dispatch, wait for nothing.
      const outcome = await ctx.ops.run(op, { $case: "registryLogin", registryLogin }, 0);
      if (outcome.state === "not_run") throw notRunError(op, outcome);
      return reply.status(202).send({
        operation_id: op.id,
        status: "running",
        registry_url: credential.registry_url,
        registry_type: credential.registry_type,
      });
    },
  }),
  route({
    method: "POST",
    url: `${AUTOMATION_API}/registry-auth/logout`,
    access: { credentials: AUTOMATION, scope: "registry_logout", role: "owner", grant: "exec" },
    tag: "automation",
    schema: { body: logoutSchema },
    responses: { 200: finished, 202: running },
    handler: async (req, reply) => {
      const body = req.body;
      const resolved = resolveOr422(body.registry_url);
      const server = await findServer(ctx.db, req.principal, body.server_id);
      const start = callerStart(req, {
        operationType: "registry_logout",
        server,
        runId: body.run_id,
        deadlineSeconds: DEADLINE_SECONDS,
        audit: { ...resolved },
      });
      const registryLogout = { registry: resolved.registry_url, deadlineSeconds: DEADLINE_SECONDS };
      // Never 5xx once started: a logout that cannot run is a completed operation with a non-zero
      // exit code. The start goes with the job: the gateway holding the agent commits it.
      const { op, outcome } = await ctx.ops.startAndRun(
        start,
        { $case: "registryLogout", registryLogout },
        LOGOUT_WAIT_MS,
        { notRunStatus: "completed" },
      );
      if (outcome.state === "running")
        return reply.status(202).send({ operation_id: op.id, status: "running" });
      const status = outcome.state === "finished" ? outcome.status : "completed";
      return reply.status(200).send({ operation_id: op.id, status, ...outcome.result });
    },
  }),
];
