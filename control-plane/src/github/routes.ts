// The GitHub endpoints of the management API (the caller's tenant):
//   GET    /api/github/app                       whether the App is configured (200 either way)
//   POST   /api/github/install-link              a link to install the App, with a signed single-use state
//   GET    /api/github/installations             the tenant's installations and their repositories
//   GET    /api/github/deliveries                deliveries concerning the tenant and what each did
//   GET    /api/tenants/{t}/applications/{a}/github-repository   the link and whether it can deploy
//   PUT    /api/tenants/{t}/applications/{a}/github-repository   {repository_id}: link by GitHub's id
//   DELETE /api/tenants/{t}/applications/{a}/github-repository
// and, with no credential, the App's setup URL GET /github/setup (githubSetupRoutes).
import type { FastifyReply, FastifyRequest } from "fastify";
import { currentSession } from "../accounts/sessions.js";
import { userActor } from "../accounts/users.js";
import { z } from "zod";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { queryInt } from "../http/validation.js";
import { compileBuild } from "../applications/source.js";
import { getApplication } from "../applications/store.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import { auditActor } from "../auth/principal.js";
import { RcError } from "../errors.js";
import { listDeliveries } from "./deliveries.js";
import { checkState, completeSetup, issueInstallLink, spendState } from "./install-state.js";
import { cannotDeploy, reachableRepository, upsertRepository } from "./installations.js";
import type { GitHubIntegration } from "./integration.js";

const appParams = z.object({ tenant_id: z.string(), application_id: z.string() });
const linkBody = z.strictObject({ repository_id: z.int().min(1).max(Number.MAX_SAFE_INTEGER) });
const pageQuery = z.strictObject({
  limit: queryInt(1, 100).optional(),
  cursor: z
    .string()
    .regex(/^\d{1,18}$/, { error: "must be a next_cursor value" })
    .optional(),
});
const setupQuery = z.object({
  installation_id: z.string().regex(/^\d{1,15}$/, { error: "must be GitHub's installation id" }),
  state: z.string().min(1).max(512),
  // GitHub's OAuth code (the App requests user authorization during installation).
  code: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,100}$/)
    .optional(),
  setup_action: z.string().optional(),
});

/** What an operator sets to turn the App on (config-schema.ts; all or none), named to owners. */
const UNCONFIGURED_SETTINGS = [
  "RELAYCTL_GITHUB_APP_ID",
  "RELAYCTL_GITHUB_APP_SLUG",
  "RELAYCTL_GITHUB_PRIVATE_KEY_FILE",
  "RELAYCTL_GITHUB_WEBHOOK_SECRET",
  "RELAYCTL_GITHUB_CLIENT_ID",
  "RELAYCTL_GITHUB_CLIENT_SECRET",
];

export const githubRoutes = (ctx: ApiContext): RouteSpec[] => {
  const need = (): GitHubIntegration => {
    if (!ctx.github) throw new RcError("RC_ERR_GITHUB_UNCONFIGURED");
    return ctx.github;
  };

  const path = "/api/tenants/:tenant_id/applications/:application_id/github-repository";
  const scoped = async (req: FastifyRequest, p: z.infer<typeof appParams>) => {
    if (p.tenant_id.toLowerCase() !== req.principal.tenantId)
      throw new RcError("RC_ERR_TENANT_NOT_FOUND", `tenant '${p.tenant_id}' not found`);
    return getApplication(ctx.db, req.principal.tenantId, p.application_id);
  };
  const present = async (repositoryId: number | null, tenantId: string) => {
    if (repositoryId === null) return { repository_id: null, deployable: false, reason: "not linked" };
    const r = await reachableRepository(ctx.db, repositoryId);
    const reason = cannotDeploy(r, tenantId);
    return {
      repository_id: repositoryId,
      full_name: r?.full_name ?? null,
      clone_url: r?.clone_url ?? null,
      deployable: reason === null,
      reason,
    };
  };

  return [
    route({
      method: "GET",
      url: "/api/github/app",
      access: { credentials: MANAGEMENT },
      tag: "management",
      summary: "Whether the GitHub App is configured on this control plane",
      // The dashboard asks here first, so a control plane without the App is not a
      // 503 on every application page; owners are told what to set, others nothing.
      handler: async (req) => {
        if (ctx.github) return { configured: true };
        // An API key acts as an owner.
        const owner = (req.principal.user?.role ?? "owner") === "owner";
        return { configured: false, ...(owner ? { settings: UNCONFIGURED_SETTINGS } : {}) };
      },
    }),
    route({
      method: "POST",
      url: "/api/github/install-link",
      access: { credentials: MANAGEMENT, role: "owner" },
      tag: "management",
      handler: async (req) => {
        const gh = need();
        // The link binds the installation to the person who finishes it, signed in: a key has no person.
        const user = req.principal.user;
        if (!user)
          throw new RcError(
            "RC_ERR_PERSON_ONLY",
            "an install link can only be finished by the person who made it, signed in: make it from the dashboard or with a person's token (relayctl login), not an API key",
          );
        return issueInstallLink(ctx.db, gh.app, req.principal.tenantId, user.id);
      },
    }),
    route({
      method: "GET",
      url: "/api/github/installations",
      access: { credentials: MANAGEMENT },
      tag: "management",
      handler: async (req) => {
        need();
        const tenantId = req.principal.tenantId;
        const insts = await ctx.db("github_installations").where({ tenant_id: tenantId }).orderBy("id");
        const repos = await ctx
          .db("github_repositories")
          .whereIn(
            "installation_id",
            insts.map((i) => i.id),
          )
          .whereNull("removed_at")
          .orderBy("full_name");
        return {
          installations: insts.map((i) => ({
            installation_id: Number(i.id),
            account: i.account_login,
            account_type: i.account_type,
            suspended: i.suspended_at !== null,
            uninstalled: i.deleted_at !== null,
            repositories: repos
              .filter((r) => Number(r.installation_id) === Number(i.id))
              .map((r) => ({
                repository_id: Number(r.id),
                full_name: r.full_name,
                private: Boolean(Number(r.private)),
              })),
          })),
        };
      },
    }),
    route({
      method: "GET",
      url: "/api/github/deliveries",
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { querystring: pageQuery },
      handler: async (req) => {
        need();
        const cursor = req.query.cursor === undefined ? undefined : Number(req.query.cursor);
        return listDeliveries(ctx.db, req.principal.tenantId, req.query.limit ?? 20, cursor);
      },
    }),
    route({
      method: "GET",
      url: path,
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: appParams },
      handler: async (req) => {
        need();
        const a = await scoped(req, req.params);
        const id = a.github_repository_id;
        return present(id === null || id === undefined ? null : Number(id), a.tenant_id);
      },
    }),
    route({
      method: "PUT",
      url: path,
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: appParams, body: linkBody },
      handler: async (req) => {
        const gh = need();
        const a = await scoped(req, req.params);
        const repositoryId = req.body.repository_id;
        const known = await reachableRepository(ctx.db, repositoryId);
        if (!known || cannotDeploy(known, a.tenant_id) !== null)
          throw new RcError(
            "RC_ERR_GITHUB_REPOSITORY_NOT_FOUND",
            `repository ${repositoryId} is not reachable by an installation bound to your tenant`,
          );
        // Read from GitHub as the installation: its clone URL and current name.
        const repo = await gh.app.repository(Number(known.installation_id), repositoryId);
        if (!repo) throw new RcError("RC_ERR_GITHUB_REPOSITORY_NOT_FOUND");
        await upsertRepository(ctx.db, Number(known.installation_id), repo);
        // Linked, the repository is the source: an application created without one
        // gets the default Dockerfile build, as PATCH git_repository gives it;
        // otherwise every push would find nothing to deploy from.
        const build = a.build ?? JSON.stringify(compileBuild(null, true));
        await ctx.db.transaction(async (trx) => {
          await trx("applications").where({ id: a.id }).update({
            github_repository_id: repositoryId,
            git_repository: repo.clone_url,
            build,
            updated_at: Date.now(),
          });
          await appendAuditEvent(trx, {
            tenantId: a.tenant_id,
            eventType: "application.github_linked",
            serverId: a.server_id,
            payload: {
              application_id: a.id,
              application_name: a.name,
              repository_id: repositoryId,
              full_name: repo.full_name,
              ...(a.build ? {} : { build: "dockerfile (default)" }),
              ...auditActor(req.principal, req.ip),
            },
          });
        });
        return present(repositoryId, a.tenant_id);
      },
    }),
    route({
      method: "DELETE",
      url: path,
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: appParams },
      handler: async (req, reply) => {
        need();
        const a = await scoped(req, req.params);
        await ctx.db.transaction(async (trx) => {
          await trx("applications")
            .where({ id: a.id })
            .update({ github_repository_id: null, updated_at: Date.now() });
          await appendAuditEvent(trx, {
            tenantId: a.tenant_id,
            eventType: "application.github_unlinked",
            serverId: a.server_id,
            payload: {
              application_id: a.id,
              application_name: a.name,
              ...auditActor(req.principal, req.ip),
            },
          });
        });
        return reply.status(204).send();
      },
    }),
  ];
};

/**
 * GET /github/setup: where GitHub sends the user after installing (the App's
 * setup URL). No credential header: the handler checks the install link's
 * signed single-use `state` (install-state.ts: it names the tenant and the
 * person who asked for the link), then the browser's session: none leads to
 * sign-in and back here (nothing spent); another person's is refused and spends
 * the state. Then GitHub's authorization `code` must be of the GitHub user who
 * installed and can access the installation.
 */
export const githubSetupRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "GET",
    url: "/github/setup",
    access: {
      public:
        "GitHub's redirect after installing the App: the handler checks the install link's signed single-use state, then that the session cookie is of the person who made the link (without one it leads to sign-in), then that GitHub's authorization code is of the user who installed and can access the installation",
    },
    tag: "github",
    handler: async (req, reply) => {
      try {
        const done = await finishSetup(ctx, req, reply);
        if (!done) return reply;
        // The person's browser lands on the dashboard, which says what happened.
        const shown = new URLSearchParams({ installed: String(done.installation_id), account: done.account });
        return reply.redirect(`${DASHBOARD_GITHUB}?${shown}`, 303);
      } catch (err) {
        // A browser (GitHub's redirect) gets the refusal on the same page; a
        // program asking for JSON gets the error body with its status.
        if (!(err instanceof RcError) || !isNavigation(req)) throw err;
        req.log.info({ code: err.code }, "github setup refused; shown on the dashboard");
        return reply.redirect(`${DASHBOARD_GITHUB}?${new URLSearchParams({ error: err.detail })}`, 303);
      }
    },
  }),
];

/** The dashboard's GitHub page (web/src/paths.ts). */
const DASHBOARD_GITHUB = "/app/github";

/** A top-level navigation of a browser, as opposed to a program's request. */
function isNavigation(req: FastifyRequest): boolean {
  return req.headers["sec-fetch-mode"] === "navigate" || /text\/html/.test(req.headers.accept ?? "");
}

/**
 * The setup URL's checks and the binding: what completeSetup bound, or
 * undefined when the reply is already a redirect to sign in first.
 */
async function finishSetup(ctx: ApiContext, req: FastifyRequest, reply: FastifyReply) {
  if (!ctx.github) throw new RcError("RC_ERR_GITHUB_UNCONFIGURED");
  const q = setupQuery.safeParse(req.query);
  if (!q.success) throw new RcError("RC_ERR_GITHUB_STATE_INVALID", "installation_id and state are required");
  const st = await checkState(ctx.db, ctx.github.app, q.data.state);
  const session = await currentSession(ctx.db, req);
  if (!session) {
    // Sign in first, then finish: /login returns here with the same parameters.
    const back = new URLSearchParams(
      Object.entries(q.data).filter((e): e is [string, string] => e[1] !== undefined),
    );
    reply.redirect(`/login?next=${encodeURIComponent(`/github/setup?${back}`)}`, 303);
    return undefined;
  }
  const { user } = session;
  if (user.id !== st.userId || user.tenant_id !== st.tenantId || user.role !== "owner") {
    await spendState(ctx.db, st.nonce);
    req.log.warn(
      { installation_id: Number(q.data.installation_id), user_id: user.id },
      "github setup refused: signed in as someone other than the install link's maker",
    );
    throw new RcError(
      "RC_ERR_GITHUB_NOT_AUTHORIZED",
      "install refused: this install link was made by another relayctl person, and only they can finish it, signed in; nothing was bound",
    );
  }
  return completeSetup(ctx.db, ctx.github.app, Number(q.data.installation_id), st, q.data.code, {
    ...userActor(user, req.ip),
    setup_action: q.data.setup_action ?? null,
  });
}
