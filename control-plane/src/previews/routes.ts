// The preview API (docs/previews.md), under the production application:
//   GET    /api/applications/{id}/previews                   newest first
//   POST   /api/applications/{id}/previews {name, ref?, image?}   202; the same name again redeploys it
//   GET    /api/applications/{id}/previews/{preview_id}
//   DELETE /api/applications/{id}/previews/{preview_id}      202: containers, images and route removed
//   GET    /api/applications/{id}/preview-env                names only
//   PUT    /api/applications/{id}/preview-env {variables}
//   DELETE /api/applications/{id}/preview-env/{name}
// A preview is an application: GET /api/applications/{preview_id} and its
// deployments and logs routes show it as they show any other.
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { urlsOf } from "../applications/hosts.js";
import { lastDeploymentsOf } from "../applications/last-deployment.js";
import { parseBuild, refSchema } from "../applications/source.js";
import { PREVIEW_ENV, listEnv, setEnv, unsetEnv } from "../applications/env.js";
import { checkRegistryCredential } from "../applications/store.js";
import { auditActor } from "../auth/principal.js";
import { RcError } from "../errors.js";
import { envNames, nothing } from "../http/answers.js";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { envSchema } from "../http/schemas.js";
import { iso } from "../lib/time.js";
import { openPreview, removePreview } from "./service.js";
import { type PreviewRow, getParent, getPreviewRow, listPreviewRows, previewByKey } from "./store.js";

const o = z.looseObject;
const params = z.object({ id: z.string() });
const previewParams = params.extend({ preview_id: z.string() });
const envParams = params.extend({ name: z.string() });
const imageRef = z
  .string()
  .min(1)
  .max(512)
  .regex(/^[a-z0-9][a-z0-9._\-/:@]*$/i, {
    error: "must be an image reference (registry/name:tag or @digest)",
  });
const createBody = z
  .strictObject({
    name: z
      .string()
      .min(1)
      .max(40)
      .regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/, { error: "must be a slug: a-z, 0-9 and '-' inside" })
      .describe("the preview's key: its name is <application>-<name>; the same name again redeploys it"),
    ref: refSchema.optional().describe("branch, tag or commit to build; default: the application's branch"),
    image: imageRef.optional().describe("an image to run instead of a build (a CI pipeline's own)"),
    registry_credential_id: z
      .uuid()
      .optional()
      .describe(
        "the registry credential that pulls `image`; default: the application's own when its image is on the same registry",
      ),
  })
  .refine((b) => !(b.ref && b.image), { error: "ref and image exclude each other" })
  .refine((b) => !b.registry_credential_id || b.image, { error: "registry_credential_id goes with image" });

const lastDeployment = o({
  deployment_id: z.string(),
  status: z.string(),
  commit_ref: z.string().nullable(),
  commit_sha: z.string().nullable(),
  created_at: z.string(),
  finished_at: z.string().nullable(),
});
export const previewAnswer = o({
  id: z.string().describe("the preview's own application id"),
  application_id: z.string().describe("its production application"),
  key: z.string(),
  number: z.int().nullable().describe("the pull or merge request's number; null for an API preview"),
  name: z.string(),
  source: z.enum(["github", "gitlab", "gitea", "api"]),
  head_ref: z.string(),
  head_sha: z.string().nullable(),
  from_fork: z.boolean(),
  image: z.string().nullable(),
  url: z.string().nullable(),
  urls: z.array(z.string()),
  pull_request_url: z.string().nullable(),
  status: z.enum(["deploying", "live", "failed", "removing"]),
  last_deployment: lastDeployment.nullable(),
  created_at: z.string(),
  updated_at: z.string(),
}).meta({ id: "Preview" });
const previewList = o({ previews: z.array(previewAnswer) }).meta({ id: "PreviewList" });
const previewStarted = o({
  preview: previewAnswer,
  deployment_id: z.string(),
  operation_id: z.string(),
}).meta({
  id: "PreviewStarted",
});
const removing = o({ preview: previewAnswer }).meta({ id: "PreviewRemoving" });

const STATUS: Record<string, "deploying" | "live" | "failed"> = {
  queued: "deploying",
  running: "deploying",
  completed: "live",
  failed: "failed",
  timeout: "failed",
};

export async function presentPreviews(ctx: ApiContext, rows: PreviewRow[], removingIds: string[] = []) {
  const last = await lastDeploymentsOf(
    ctx.db,
    rows.map((r) => r.id),
  );
  return Promise.all(
    rows.map(async (r) => {
      const urls = await urlsOf(ctx.db, ctx.config.appsUrl, r);
      const build = parseBuild(r.build);
      const d = last.get(r.id) ?? null;
      return {
        id: r.id,
        application_id: r.preview_of!,
        key: r.preview_key!,
        number: r.preview_number === null ? null : Number(r.preview_number),
        name: r.name,
        source: r.preview_source ?? "api",
        head_ref: r.preview_head_ref ?? "",
        head_sha: r.preview_head_sha ?? d?.commit_sha ?? null,
        from_fork: Boolean(Number(r.preview_from_fork)),
        image: build?.type === "image" ? build.image : null,
        url: urls.url,
        urls: urls.urls,
        pull_request_url: r.preview_url ?? null,
        status: removingIds.includes(r.id)
          ? ("removing" as const)
          : (STATUS[d?.status ?? "queued"] ?? "deploying"),
        last_deployment: d,
        created_at: iso(r.created_at)!,
        updated_at: iso(r.updated_at)!,
      };
    }),
  );
}

const actorOf = (req: FastifyRequest) => auditActor(req.principal, req.ip);

export const previewRoutes = (ctx: ApiContext): RouteSpec[] => {
  const pctx = (req: FastifyRequest) => ({ ...ctx, log: req.log as never });
  return [
    route({
      method: "GET",
      url: "/api/applications/:id/previews",
      access: { credentials: MANAGEMENT },
      tag: "management",
      summary: "The application's previews, newest first",
      schema: { params },
      responses: { 200: previewList },
      handler: async (req) => {
        const parent = await getParent(ctx.db, req.principal.tenantId, req.params.id);
        return { previews: await presentPreviews(ctx, await listPreviewRows(ctx.db, parent.id)) };
      },
    }),
    route({
      method: "POST",
      url: "/api/applications/:id/previews",
      access: { credentials: MANAGEMENT, role: "deployer" },
      tag: "management",
      summary: "Open or redeploy a preview from a ref or an image (202)",
      schema: { params, body: createBody },
      responses: { 202: previewStarted },
      handler: async (req, reply) => {
        const parent = await getParent(ctx.db, req.principal.tenantId, req.params.id);
        const body = req.body;
        const p = req.principal;
        const before = await previewByKey(ctx.db, parent.id, body.name);
        if (body.registry_credential_id)
          await checkRegistryCredential(
            ctx.db,
            p.tenantId,
            body.registry_credential_id,
            "registry_credential_id",
          );
        const d = await openPreview(
          pctx(req),
          parent,
          {
            key: body.name,
            number: null,
            source: "api",
            headRef: body.image ?? body.ref ?? parent.deploy_branch,
            headSha: null,
            fromFork: false,
            url: null,
            image: body.image ?? null,
            registryCredentialId: body.registry_credential_id ?? null,
          },
          {
            commitRef: body.image ? undefined : (body.ref ?? parent.deploy_branch),
            trigger: p.user && !p.session ? "cli" : "api",
            deployActor: p.user
              ? { type: "user", id: p.user.id, name: p.user.email }
              : { type: "api_key", id: p.keyId, name: p.keyName },
            actor: {
              ...actorOf(req),
              reason: before ? "redeployed through the API" : "opened through the API",
            },
          },
        );
        const [preview] = await presentPreviews(ctx, [d.row]);
        return reply
          .status(202)
          .send({ preview: preview!, deployment_id: d.deploymentId, operation_id: d.operationId });
      },
    }),
    route({
      method: "GET",
      url: "/api/applications/:id/previews/:preview_id",
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: previewParams },
      responses: { 200: previewAnswer },
      handler: async (req) => {
        const parent = await getParent(ctx.db, req.principal.tenantId, req.params.id);
        const [preview] = await presentPreviews(ctx, [
          await getPreviewRow(ctx.db, parent, req.params.preview_id),
        ]);
        return preview!;
      },
    }),
    route({
      method: "DELETE",
      url: "/api/applications/:id/previews/:preview_id",
      access: { credentials: MANAGEMENT, role: "deployer" },
      tag: "management",
      summary: "Stop a preview: its containers, images and route are removed (202)",
      schema: { params: previewParams },
      responses: { 202: removing },
      handler: async (req, reply) => {
        const parent = await getParent(ctx.db, req.principal.tenantId, req.params.id);
        const row = await getPreviewRow(ctx.db, parent, req.params.preview_id);
        const [preview] = await presentPreviews(ctx, [row], [row.id]);
        await removePreview(pctx(req), parent, row, { ...actorOf(req), reason: "removed through the API" });
        return reply.status(202).send({ preview: preview! });
      },
    }),
    route({
      method: "GET",
      url: "/api/applications/:id/preview-env",
      access: { credentials: MANAGEMENT },
      tag: "management",
      summary: "Names of the values previews get instead of production's (never values)",
      schema: { params },
      responses: { 200: envNames },
      handler: async (req) => {
        const parent = await getParent(ctx.db, req.principal.tenantId, req.params.id);
        return listEnv(ctx.db, parent.id, PREVIEW_ENV);
      },
    }),
    route({
      method: "PUT",
      url: "/api/applications/:id/preview-env",
      access: { credentials: MANAGEMENT },
      tag: "management",
      summary: "Set preview values (add or replace by name)",
      schema: { params, body: z.strictObject({ variables: envSchema }) },
      responses: { 200: envNames },
      handler: async (req) => {
        const parent = await getParent(ctx.db, req.principal.tenantId, req.params.id);
        if (parent.preview_of) throw new RcError("RC_ERR_PREVIEWS_DISABLED", `${parent.name} is a preview`);
        return setEnv(ctx.db, ctx.config.masterKey, parent, req.body.variables, actorOf(req), PREVIEW_ENV);
      },
    }),
    route({
      method: "DELETE",
      url: "/api/applications/:id/preview-env/:name",
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: envParams },
      responses: { 204: nothing },
      handler: async (req, reply) => {
        const parent = await getParent(ctx.db, req.principal.tenantId, req.params.id);
        await unsetEnv(ctx.db, parent, req.params.name, actorOf(req), PREVIEW_ENV);
        return reply.status(204).send();
      },
    }),
  ];
};
