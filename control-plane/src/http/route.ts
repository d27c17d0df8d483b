// A route is one declaration: its method and URL, who may call it (the
// credentials it takes, the least role of a person, the operation scope of a
// key), its schemas, its documented answers and its handler. api/routes.ts
// lists every declaration and api/register-routes.ts turns each into a Fastify
// route, deriving authentication, the role and scope checks, rate limiting,
// validation and the OpenAPI description from it. Nothing about a route is
// kept anywhere else (no table keyed by URL).
import type {
  FastifyReply,
  FastifyRequest,
  HTTPMethods,
  RouteGenericInterface,
  RouteShorthandOptions,
} from "fastify";
import type { ZodType, z } from "zod";
import type { Grant, Needs, Role } from "../auth/roles.js";
import type { OperationScope } from "../operations/types.js";

/**
 * A credential a route takes, admitted before its body is read:
 * - `automation_key`: `Authorization: Bearer rca_…` (its scope and rate limit apply);
 * - `api_key`: `X-API-Key: rck_…` (the tenant's full access);
 * - `access_token`: a person's `Authorization: Bearer rco_…` (also `X-API-Key: rco_…` on a
 *   route that takes `api_key`);
 * - `web_session`: the dashboard's session cookie, when no credential header is sent (with
 *   `X-CSRF-Token` on a change); on a route that takes `automation_key`, GET only;
 * - `session_token`: an external-deploy session's `Authorization: Bearer rds_…`;
 * - `metrics_token`: RELAYCTL_METRICS_TOKEN as `Authorization: Bearer …`, when one is set.
 */
export type Credential =
  | "automation_key"
  | "api_key"
  | "access_token"
  | "web_session"
  | "session_token"
  | "metrics_token";

/** Where the Automation API lives (the contract's versioned prefix). */
export const AUTOMATION_API = "/api/automation/v1";

/** The Automation API's callers: an automation key or a person's access token. */
export const AUTOMATION = ["automation_key", "access_token"] as const satisfies readonly Credential[];
/** The management API's callers: an API key, a person's access token or their signed-in browser. */
export const MANAGEMENT = ["api_key", "access_token", "web_session"] as const satisfies readonly Credential[];

export type Access =
  | {
      credentials: readonly Credential[];
      /**
       * The least role a person needs (auth/roles.ts; an API key acts as an owner, an
       * automation key keeps its own scope). @default "viewer" for a GET, "owner" for a change
       * (a change nobody classified stays an owner's)
       */
      role?: Role;
      /** A per-person grant that admits a person below `role` (exec and registry login: `exec`). */
      grant?: Grant;
      /** The operation scope an automation key needs (403 outside it, checked before the body). */
      scope?: OperationScope;
      /**
       * The handler's operation start (callerStart) carries an automation key's request
       * count, committed with it (auth/deferred-count.ts): no admission round trip for a key
       * already admitted in its window. Only for a handler whose every path either starts
       * its operation through the operations service or fails without side effects first
       * (it may run again once, on the key's new row).
       */
      countWithStart?: boolean;
    }
  | {
      /**
       * No credential the api admits: say why, or what the handler checks instead
       * (a join token in the body, GitHub's signature over the raw body, a sign-in form).
       */
      public: string;
    };

export interface RouteSchemas {
  body?: ZodType;
  params?: ZodType;
  querystring?: ZodType;
  headers?: ZodType;
}

type Infer<T> = T extends ZodType ? z.output<T> : unknown;

/** The request a handler gets: its body, params and query as the schemas parse them. */
export type RouteRequest<S extends RouteSchemas> = FastifyRequest<
  RouteGenericInterface & {
    Body: Infer<S["body"]>;
    Params: Infer<S["params"]>;
    Querystring: Infer<S["querystring"]>;
  }
>;

export interface RouteSpec<S extends RouteSchemas = RouteSchemas> {
  method: HTTPMethods | HTTPMethods[];
  url: string;
  access: Access;
  /** The OpenAPI tag (the part of the API it belongs to). */
  tag: string;
  summary?: string;
  /** Left out of the OpenAPI document (pages, redirects, assets). */
  hidden?: boolean;
  schema?: S;
  /** The documented answers by status, for the OpenAPI document (they do not filter answers). */
  responses?: Record<number, ZodType>;
  /**
   * The bodies it parses: `json` (application/json only; anything else is 415), `form`
   * (also application/x-www-form-urlencoded: pages and OAuth endpoints), `raw-json`
   * (application/json kept as the raw bytes, for a signature over them: webhooks).
   * @default "json"
   */
  accepts?: "json" | "form" | "raw-json";
  /** Other Fastify route options (bodyLimit, config, onSend…); auth hooks are not set here. */
  options?: Omit<RouteShorthandOptions, "schema" | "onRequest" | "preValidation">;
  handler: (req: RouteRequest<S>, reply: FastifyReply) => unknown;
}

/** Declares a route, typing its handler's request from its schemas. */
export function route<S extends RouteSchemas = Record<never, never>>(spec: RouteSpec<S>): RouteSpec {
  return spec as unknown as RouteSpec;
}

/** The credentials of a route, empty for a public one. */
export function credentialsOf(access: Access): readonly Credential[] {
  return "public" in access ? [] : access.credentials;
}

/**
 * What a route needs of a person: its declared role and grant; undeclared, a read
 * needs a viewer and a change an owner. Null for a public route.
 */
export function needsOf(spec: Pick<RouteSpec, "method" | "access">): Needs | null {
  const { access } = spec;
  if ("public" in access) return null;
  const reads = [spec.method].flat().every((m) => m === "GET" || m === "HEAD");
  const role = access.role ?? (reads ? "viewer" : "owner");
  return access.grant ? { role, grant: access.grant } : { role };
}
