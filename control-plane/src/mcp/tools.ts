// The MCP tools: small and task-shaped (not one per route). Each names the
// API it calls and what the credential needs for it, reuses the API's own zod
// schemas as its input schema (the API validates again and its 422 detail is the
// answer), declares the shape of its structured result, and says how it acts
// (read-only, destructive, idempotent). Results are the API's answers as they
// are: the API already scrubs secrets and never returns env values.
import type { ToolAnnotations } from "@modelcontextprotocol/server";
import { z } from "zod";
import {
  DEPLOY_TIMEOUT,
  deployTimeoutSchema,
  execBody,
  restartBody,
  rollbackBody,
} from "../http/operation-bodies.js";
import { LIMITS, envSchema, runIdSchema, timeoutSecondsSchema, uuidSchema } from "../http/schemas.js";
import { dateTime } from "../http/validation.js";
import { refSchema } from "../applications/source.js";
import { RUN_CURSOR_PATTERN } from "../operations/read.js";
import type { OperationScope } from "../operations/types.js";
import type { ApiCaller } from "./api-client.js";
import {
  type ProgressReader,
  type StepProgress,
  followDeploymentLog,
  followOperation,
} from "./deploy-follow.js";
import { followRollout } from "./rollout-follow.js";

export interface ToolEnv {
  api: ApiCaller;
  /** True for a person's OAuth token, which may read the dashboard API as well. */
  person: boolean;
  progress(p: StepProgress): Promise<void>;
  /** The progress of a deployment of the caller's tenant (a key's deploy reports its steps with it). */
  readProgress: ProgressReader;
  signal: AbortSignal;
}

export interface ToolSpec {
  name: string;
  title: string;
  description: string;
  /** "dashboard": a person's token only (an rca_ key cannot read it); else the automation operation the key's scope must allow, or null for any credential. */
  needs: "dashboard" | OperationScope | null;
  /** The route it calls ("METHOD /url" as declared), when a person needs more for it than a read. */
  route?: string;
  annotations: ToolAnnotations;
  input: z.ZodObject;
  output: z.ZodType<Record<string, unknown>>;
  run(args: never, env: ToolEnv): Promise<Record<string, unknown>>;
}

const read: ToolAnnotations = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false,
};
const loose = (shape: z.ZodRawShape) => z.looseObject(shape);
const list = (field: string) => loose({ [field]: z.array(loose({})) });
const path = encodeURIComponent;

const tenantPath = async (api: ApiCaller, applicationId: string) => {
  const tenant = await api.json<{ id: string }>("GET", "/api/tenant");
  return `/api/tenants/${path(tenant.id)}/applications/${path(applicationId)}`;
};

const deployInput = z.strictObject({
  application_id: uuidSchema,
  commit_ref: refSchema
    .optional()
    .describe("branch, tag or commit SHA; default: the application's deploy branch"),
  env_overrides: envSchema.optional().describe("variables for this deployment only (not saved)"),
  timeout_seconds: deployTimeoutSchema
    .optional()
    .describe(
      `deadline of the deployment, ${DEPLOY_TIMEOUT.min}-${DEPLOY_TIMEOUT.max}, default ${DEPLOY_TIMEOUT.default}`,
    ),
  run_id: runIdSchema.optional(),
});

export const TOOLS: ToolSpec[] = [
  {
    name: "list_servers",
    title: "List servers",
    description: "The organization's servers with their agent version and when each was last seen.",
    needs: "dashboard",
    annotations: read,
    input: z.strictObject({}),
    output: list("servers"),
    run: async (_a, { api }) => api.json("GET", "/api/servers"),
  },
  {
    name: "list_applications",
    title: "List applications",
    description:
      "The organization's applications: name, server, container, port, domains, git source, and the URL each is served at (url, urls).",
    needs: "dashboard",
    annotations: read,
    input: z.strictObject({}),
    output: list("applications"),
    run: async (_a, { api }) => api.json("GET", "/api/applications"),
  },
  {
    name: "get_application",
    title: "Get an application",
    description:
      "One application's settings and the URL it is served at (url, urls; secrets shown only as names and dates).",
    needs: "dashboard",
    annotations: read,
    input: z.strictObject({ application_id: uuidSchema }),
    output: loose({ id: z.string() }),
    run: async (a: { application_id: string }, { api }) =>
      api.json("GET", `/api/applications/${path(a.application_id)}`),
  },
  {
    name: "exec_command",
    title: "Run a shell command on a server",
    description: `Runs a command on a server and returns its exit code, stdout and stderr (status 'running' with an operation_id when it outlasts timeout_seconds: read it later with get_operation). Command up to ${LIMITS.commandChars} characters.`,
    needs: "exec",
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    // The API's own body rules (run_context is CI metadata, not the assistant's).
    input: execBody.omit({ run_context: true }).extend({
      timeout_seconds: timeoutSecondsSchema.optional().describe("seconds to wait, 1-900, default 60"),
    }),
    output: loose({ operation_id: z.string(), status: z.string() }),
    run: async (a, { api }) => api.json("POST", "/api/automation/v1/exec", a),
  },
  {
    name: "deploy_application",
    title: "Deploy an application",
    description:
      "Deploys an application (fetch, build, start, health check, switch, retire) and reports each step as progress; answers with the deployment when it serves (its url) or fails.",
    needs: "deploy",
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    input: deployInput,
    output: loose({ status: z.string() }),
    run: async (a: z.infer<typeof deployInput>, { api, person, progress, readProgress, signal }) => {
      const started = await api.json<{ operation_id: string; deployment_id: string; rollout_id?: string }>(
        "POST",
        "/api/automation/v1/deploy",
        a,
      );
      // A fleet application's deploy is a rollout: a person follows its servers (rollout-follow.ts).
      if (person && started.rollout_id)
        return followRollout(api, a.application_id, started.rollout_id, progress, signal);
      if (!person) return followOperation(api, started, readProgress, progress, signal);
      const base = await tenantPath(api, a.application_id);
      return followDeploymentLog(api, `${base}/deployments/${path(started.deployment_id)}`, progress, signal);
    },
  },
  {
    name: "rollback_application",
    title: "Roll an application back",
    description:
      "Starts a kept release of an application again, with that release's image and configuration and no build (start, health check, switch, retire); default the release before the live one. list_releases says which releases are kept. Answers with the deployment when it serves or fails.",
    needs: "deploy",
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    input: rollbackBody.omit({ run_context: true }),
    output: loose({ status: z.string() }),
    run: async (a: { application_id: string }, { api, person, progress, readProgress, signal }) => {
      const started = await api.json<{ operation_id: string; deployment_id: string; rollout_id?: string }>(
        "POST",
        "/api/automation/v1/rollback",
        a,
      );
      if (person && started.rollout_id)
        return followRollout(api, a.application_id, started.rollout_id, progress, signal);
      if (!person) return followOperation(api, started, readProgress, progress, signal);
      const base = await tenantPath(api, a.application_id);
      return followDeploymentLog(api, `${base}/deployments/${path(started.deployment_id)}`, progress, signal);
    },
  },
  {
    name: "list_releases",
    title: "List an application's releases",
    description:
      "An application's releases (deployments that went live), newest first: which one is live, its commit, image and since when, and whether its image is kept for a rollback.",
    needs: "dashboard",
    annotations: read,
    input: z.strictObject({ application_id: uuidSchema }),
    output: list("releases"),
    run: async (a: { application_id: string }, { api }) =>
      api.json("GET", `${await tenantPath(api, a.application_id)}/releases`),
  },
  {
    name: "application_logs",
    title: "Read an application's logs",
    description:
      "The last lines (tail, default 200, at most 10000) of what the application's live container printed, stdout and stderr, each line with its stream; since limits them to a time (RFC 3339) or a recent duration (10m, 1h). Every env value of the application is masked as ***. Start here to see why an application fails or what it is doing. 409 when it has no live container (deploy it first).",
    // A read of the application: an automation key within its server scope may call it too.
    needs: null,
    // A person needs the deployer role (and the deploy scope) for it: an application's output.
    route: "GET /api/applications/:id/logs",
    annotations: read,
    input: z.strictObject({
      application_id: uuidSchema,
      tail: z.int().min(1).max(10_000).optional().describe("lines from the end, 1-10000, default 200"),
      since: z
        .string()
        .regex(/^[0-9][0-9A-Za-z:.+-]{0,63}$/, "must be an RFC 3339 time or a duration such as 10m")
        .optional()
        .describe("only lines since then: an RFC 3339 time or a duration such as 10m or 1h30m"),
    }),
    output: loose({ container: z.string(), lines: z.array(loose({})), end: z.string() }),
    run: async (a: { application_id: string; tail?: number; since?: string }, { api }) => {
      const q = new URLSearchParams();
      if (a.tail !== undefined) q.set("tail", String(a.tail));
      if (a.since !== undefined) q.set("since", a.since);
      return api.json("GET", `/api/applications/${path(a.application_id)}/logs${q.size ? `?${q}` : ""}`);
    },
  },
  {
    name: "get_deployment",
    title: "Get a deployment",
    description:
      "One deployment of an application: status, commit, image, where it serves (url, upstream), and each step with its log.",
    needs: "dashboard",
    annotations: read,
    input: z.strictObject({ application_id: uuidSchema, deployment_id: uuidSchema }),
    output: loose({ deployment_id: z.string(), status: z.string(), steps: z.array(loose({})) }),
    run: async (a: { application_id: string; deployment_id: string }, { api }) =>
      api.json("GET", `${await tenantPath(api, a.application_id)}/deployments/${path(a.deployment_id)}`),
  },
  {
    name: "list_previews",
    title: "List an application's previews",
    description:
      "An application's preview environments, newest first: each one's name (key), status (deploying, live, failed, removing), URL, pull request (number, link) or source 'api', head ref and commit or image, and last deployment. A preview's id is an application id: get_application, get_deployment and application_logs take it.",
    needs: "dashboard",
    annotations: read,
    input: z.strictObject({ application_id: uuidSchema }),
    output: list("previews"),
    run: async (a: { application_id: string }, { api }) =>
      api.json("GET", `/api/applications/${path(a.application_id)}/previews`),
  },
  {
    name: "create_preview",
    title: "Create a preview",
    description:
      "Creates a preview environment of an application (or deploys the preview of that name anew) from a branch, tag or commit (ref, built like the application) or from an image, beside production on the same server; reports each step as progress and answers with the preview and its deployment when it serves (url) or fails. 409 when the application's previews are off.",
    needs: "dashboard",
    route: "POST /api/applications/:id/previews",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    input: z.strictObject({
      application_id: uuidSchema,
      name: z
        .string()
        .max(40)
        .regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/, "must be a slug: a-z, 0-9 and '-' inside")
        .describe("the preview's name, e.g. pr-12 or ci-481"),
      ref: refSchema.optional().describe("branch, tag or commit to build; default: the deploy branch"),
      image: z.string().min(1).max(1024).optional().describe("an image to run instead of a build"),
    }),
    output: loose({ preview: loose({ id: z.string() }), deployment: loose({ status: z.string() }) }),
    run: async (
      a: { application_id: string; name: string; ref?: string; image?: string },
      { api, progress, signal },
    ) => {
      const { application_id, ...body } = a;
      const started = await api.json<{ preview: { id: string }; deployment_id: string }>(
        "POST",
        `/api/applications/${path(application_id)}/previews`,
        body,
      );
      const base = await tenantPath(api, started.preview.id);
      const deployment = await followDeploymentLog(
        api,
        `${base}/deployments/${path(started.deployment_id)}`,
        progress,
        signal,
      );
      const preview = await api.json<Record<string, unknown>>(
        "GET",
        `/api/applications/${path(application_id)}/previews/${path(started.preview.id)}`,
      );
      return { preview, deployment };
    },
  },
  {
    name: "remove_preview",
    title: "Remove a preview",
    description:
      "Removes one preview environment of an application (preview_id from list_previews): its containers, images and route are removed from the server. Production is not touched.",
    needs: "dashboard",
    route: "DELETE /api/applications/:id/previews/:preview_id",
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    input: z.strictObject({ application_id: uuidSchema, preview_id: uuidSchema }),
    output: loose({ removed: z.boolean() }),
    run: async (a: { application_id: string; preview_id: string }, { api }) => {
      await api.json("DELETE", `/api/applications/${path(a.application_id)}/previews/${path(a.preview_id)}`);
      return { removed: true, preview_id: a.preview_id };
    },
  },
  {
    name: "get_operation",
    title: "Get an operation",
    description: "One operation (exec, deploy, restart...) with its status and whole output.",
    needs: null,
    annotations: read,
    input: z.strictObject({ operation_id: uuidSchema }),
    output: loose({ operation_id: z.string(), status: z.string() }),
    run: async (a: { operation_id: string }, { api }) =>
      api.json("GET", `/api/automation/v1/operations/${path(a.operation_id)}`),
  },
  {
    name: "list_operations",
    title: "List the operations of a run",
    description:
      "The operations started with one run_id, newest first, with output previews; page on with next_cursor.",
    needs: null,
    annotations: read,
    input: z.strictObject({
      run_id: runIdSchema,
      cursor: z
        .string()
        .regex(new RegExp(RUN_CURSOR_PATTERN), "must be a cursor from next_cursor")
        .optional(),
    }),
    output: list("operations"),
    run: async (a: { run_id: string; cursor?: string }, { api }) =>
      api.json("GET", `/api/automation/v1/operations?${new URLSearchParams(a)}`),
  },
  {
    name: "restart_container",
    title: "Restart a container",
    description:
      "Restarts a container on a server: an exact container name, or an application's linked_container_name for its live container.",
    needs: "restart",
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    input: restartBody,
    output: loose({ operation_id: z.string(), status: z.string() }),
    run: async (a, { api }) => api.json("POST", "/api/automation/v1/restart", a),
  },
  {
    name: "list_audit_events",
    title: "List audit events",
    description:
      "The organization's audit trail, oldest first, filtered by run, operation, server or date; page on with next_cursor.",
    needs: "dashboard",
    annotations: read,
    input: z.strictObject({
      run_id: runIdSchema.optional(),
      operation_id: uuidSchema.optional(),
      server_id: uuidSchema.optional(),
      since: z
        .union([z.iso.date(), dateTime], { error: "must be an ISO 8601 date, or date-time with a time zone" })
        .optional()
        .describe("ISO 8601 date, or date-time with a time zone"),
      limit: z.int().min(1).max(1000).optional(),
      cursor: z
        .string()
        .regex(/^\d{1,16}$/, "must be a next_cursor value")
        .optional(),
    }),
    output: list("events"),
    run: async (a: Record<string, string | number>, { api }) => {
      const q = new URLSearchParams(Object.entries(a).map(([k, v]): [string, string] => [k, String(v)]));
      return api.json("GET", `/api/audit${q.size ? `?${q}` : ""}`);
    },
  },
];
