// Turns route declarations (http/route.ts) into Fastify routes. Everything a
// route needs besides its handler is derived here, from its declaration alone:
//   onRequest      admission of the credentials it takes (api/admission.ts),
//                  before the body is read, then the role it needs (403);
//   preValidation  the operation scope a key needs (403 before the body's rules
//                  are told: a key without the scope learns nothing about them);
//   onError        refusals of a known key audited (auth/security-audit.ts);
//                  on a `countWithStart` route, the full admission first when
//                  the request was admitted on a cached key row (auth/deferred-count.ts);
//   schema         validation (zod) and the OpenAPI description: tag, the
//                  security schemes of its credentials, its documented answers.
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from "fastify";
import type { ZodType } from "zod";
import { acceptForms } from "../accounts/form-body.js";
import { requireOperation } from "../auth/automation-key.js";
import { type Needs, personRefusal } from "../auth/roles.js";
import type { Principal } from "../auth/principal.js";
import type { OperationScope } from "../operations/types.js";
import { auditRefusals } from "../auth/security-audit.js";
import { reconfirmed } from "../auth/deferred-count.js";
import { RcError } from "../errors.js";
import { errorBody } from "../http/answers.js";
import { type Credential, type RouteSpec, credentialsOf, needsOf } from "../http/route.js";
import { type AdmissionDeps, admissionFor } from "./admission.js";

/** The OpenAPI security scheme of each credential (observability/openapi.ts declares them). */
const SCHEME: Record<Credential, string> = {
  automation_key: "automationKey",
  api_key: "apiKey",
  access_token: "accessToken",
  web_session: "webSession",
  session_token: "sessionToken",
  metrics_token: "metricsToken",
};

const STATUS_WORDS: Record<string, string> = {
  200: "OK",
  201: "Created",
  202: "Accepted: the operation goes on; poll it",
  503: "Unavailable: the status and `detail` say what; retry later",
};

/** A documented JSON answer with its description (Fastify's content-type form of a response schema). */
function json(description: string | undefined, body: ZodType) {
  return { description: description ?? "OK", content: { "application/json": { schema: body } } };
}

function documented(answers: Record<number, ZodType>) {
  const response: Record<string, unknown> = {};
  // A 204 stays a bare schema: @fastify/swagger documents it without content.
  for (const [status, body] of Object.entries(answers))
    response[status] = status === "204" ? body : json(STATUS_WORDS[status], body);
  response["4xx"] = json("Refused: the status and `detail` say why (docs/errors.md)", errorBody);
  response["5xx"] = json("Unavailable (503: retry later) or failed", errorBody);
  return response;
}

/** A declaration that cannot be served as written stops the program at boot, naming the route. */
function check(spec: RouteSpec, credentials: readonly Credential[]): void {
  const where = `${[spec.method].flat().join(",")} ${spec.url}`;
  const admits = ["automation_key", "api_key", "session_token", "metrics_token"] as const;
  if (credentials.length > 0 && !admits.some((c) => credentials.includes(c)))
    throw new Error(`route ${where}: credentials must include a key, a session token or the metrics token`);
  const getOnly = [spec.method].flat().every((m) => m === "GET");
  if (credentials.includes("web_session") && !credentials.includes("api_key") && !getOnly)
    throw new Error(`route ${where}: beside an automation key, a web session may only read (GET)`);
}

/**
 * 403 when a person's role (or grant) is below what the route needs, or their OAuth
 * token lacks the route's scope; keys are checked by their own scope.
 */
function requireRole(req: FastifyRequest, needs: Needs | null): void {
  const user = req.principal?.user;
  if (!needs || !user) return;
  const why = personRefusal(user, needs, req.principal.scopes);
  if (why) throw new RcError("RC_ERR_ROLE_FORBIDDEN", `${req.method} ${req.routeOptions.url} ${why}`);
}

/** The Fastify route of a declaration. */
export function fastifyRoute(spec: RouteSpec, deps: AdmissionDeps): RouteOptions {
  const { access } = spec;
  const credentials = credentialsOf(access);
  check(spec, credentials);
  const scope = "public" in access ? undefined : access.scope;
  const countWithStart = !("public" in access) && access.countWithStart === true;
  const admit = admissionFor(deps, credentials, countWithStart ? { scope } : undefined);
  const needs = needsOf(spec);
  const schema: Record<string, unknown> = { ...spec.schema, tags: [spec.tag] };
  if (spec.summary) schema.summary = spec.summary;
  if (spec.hidden) schema.hide = true;
  if (credentials.length > 0) schema.security = credentials.map((c) => ({ [SCHEME[c]]: [] }));
  if (spec.responses) schema.response = documented(spec.responses);
  const route: RouteOptions = {
    ...spec.options,
    method: spec.method,
    url: spec.url,
    schema,
    handler: countWithStart ? rerunOnNewRow(spec.handler, scope) : (spec.handler as RouteOptions["handler"]),
  };
  if (admit) {
    route.onRequest = async (req, reply) => {
      const principal = await admit(req, reply);
      if (principal) req.principal = principal;
      requireRole(req, needs);
    };
    route.onError = countWithStart
      ? [admitBeforeRefusal(scope), auditRefusals(deps.db)]
      : auditRefusals(deps.db);
  }
  if (scope)
    route.preValidation = async (req) => {
      try {
        requireOperation(req.principal, scope);
      } catch (err) {
        // Admitted on a cached row (countWithStart): the full admission first, then the row as it is.
        if (!(await admittedBeforeRefusal(req, scope))) throw err;
      }
    };
  return route;
}

/**
 * A countWithStart route's request admitted on a cached key row, before one of its
 * refusals is answered: the full admission, then, on a key row other than the
 * one it was admitted on, the route's scope again. Their refusals are thrown (they
 * come before the route's own); true when the row changed.
 */
async function admittedBeforeRefusal(
  req: FastifyRequest,
  scope: OperationScope | undefined,
): Promise<boolean> {
  if (!(await reconfirmed(req))) return false;
  if (scope) requireOperation(req.principal, scope);
  return true;
}

/**
 * A countWithStart route's handler: a refusal it throws while the request's count
 * is still deferred (before its start took it) is answered only after the full
 * admission and the scope (admittedBeforeRefusal); when that admission read a key
 * row other than the one the request was admitted on, the handler runs again,
 * once, on the new row (what failed had no side effects: nothing was started).
 */
function rerunOnNewRow(
  handler: RouteSpec["handler"],
  scope: OperationScope | undefined,
): RouteOptions["handler"] {
  const run = handler as (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
  return async function (this: unknown, req: FastifyRequest, reply: FastifyReply) {
    try {
      return await run.call(this, req, reply);
    } catch (err) {
      if (!(await admittedBeforeRefusal(req, scope))) throw err;
      return run.call(this, req, reply);
    }
  } as RouteOptions["handler"];
}

/**
 * onError of a countWithStart route, before the refusals are audited: an error
 * met while the request's count was still deferred (its body invalid, or never
 * whole: the caller went away) waits for the full admission and the scope, whose
 * refusal answers in its place.
 */
const admitBeforeRefusal = (scope: OperationScope | undefined) => async (req: FastifyRequest) => {
  try {
    await admittedBeforeRefusal(req, scope);
  } catch (refusal) {
    req.admissionRefusal = refusal as Error;
  }
};

type Accepts = NonNullable<RouteSpec["accepts"]>;

/** Content-type parsers are per scope in Fastify: each kind of body gets a scope of its own. */
const PARSERS: Record<Exclude<Accepts, "json">, (scope: FastifyInstance, routes: RouteSpec[]) => void> = {
  form: (scope) => acceptForms(scope),
  "raw-json": (scope, routes) => {
    scope.removeAllContentTypeParsers();
    const bodyLimit = Math.max(...routes.map((r) => r.options?.bodyLimit ?? 1024 * 1024));
    scope.addContentTypeParser(["application/json"], { parseAs: "buffer", bodyLimit }, (_req, body, done) =>
      done(null, body),
    );
  },
};

/** The declarations registered on each app, for what reads the manifest at run time (MCP's tool list). */
const MANIFESTS = new WeakMap<FastifyInstance, readonly RouteSpec[]>();

/** The route declarations registered on `app` (empty before registerRoutes). */
export function manifestOf(app: FastifyInstance): readonly RouteSpec[] {
  return MANIFESTS.get(app) ?? [];
}

/**
 * The routes a person may call, as "METHOD /url" (the URL as declared): what the
 * dashboard shows or hides, read from the same declarations the checks use.
 */
export function permissionsOf(app: FastifyInstance, p: Principal): string[] {
  if (!p.user) return [];
  const user = p.user;
  return manifestOf(app).flatMap((spec) => {
    const needs = needsOf(spec);
    if (!needs || !credentialsOf(spec.access).includes("access_token")) return [];
    if (personRefusal(user, needs, p.scopes) !== null) return [];
    return [spec.method].flat().map((m) => `${m} ${spec.url}`);
  });
}

/** Registers the declarations on `app` (its root, or a scope: the gateway's health and metrics). */
export async function registerRoutes(
  app: FastifyInstance,
  routes: readonly RouteSpec[],
  deps: AdmissionDeps,
): Promise<void> {
  MANIFESTS.set(app, [...(MANIFESTS.get(app) ?? []), ...routes]);
  for (const name of ["principal", "keyActor", "deploySession", "deferredAdmission", "admissionRefusal"])
    if (!app.hasRequestDecorator(name)) app.decorateRequest(name, null);
  const byBody = Map.groupBy(routes, (r) => r.accepts ?? "json");
  for (const spec of byBody.get("json") ?? []) app.route(fastifyRoute(spec, deps));
  for (const [accepts, group] of byBody) {
    if (accepts === "json") continue;
    await app.register(async (scope) => {
      PARSERS[accepts](scope, group);
      for (const spec of group) scope.route(fastifyRoute(spec, deps));
    });
  }
}
