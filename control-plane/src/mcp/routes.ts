// The MCP endpoint: Streamable HTTP at /mcp (stateless, so any api instance
// serves any request) and its OAuth discovery. /mcp admits the same credentials
// as the Automation API (an rca_ key with its scopes, or a person's rco_ access
// token); a refusal carries the MCP authorization spec's
// WWW-Authenticate pointer to /.well-known/oauth-protected-resource, which names
// relayctl's own authorization server (RFC 9728 → RFC 8414 → authorization code
// grant with PKCE and client registration, or the device flow).
import { Readable } from "node:stream";
import type { ReadableStream as NodeWebStream } from "node:stream/web";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/server";
import type { Knex } from "knex";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { progressSince } from "../deployments/view.js";
import type { ApiContext } from "../http/context.js";
import { manifestOf } from "../api/register-routes.js";
import type { Needs } from "../auth/roles.js";
import { AUTOMATION, AUTOMATION_API, type RouteSpec, needsOf, route } from "../http/route.js";
import { issuerOf } from "../oauth/routes.js";
import { injectCaller } from "./api-client.js";
import type { ProgressReader } from "./deploy-follow.js";
import { type ToolNeeds, buildMcpServer } from "./server.js";

export const MCP_PATH = "/mcp";
const METADATA_PATH = "/.well-known/oauth-protected-resource";

/** RFC 9728 protected resource metadata of /mcp. */
function resourceMetadata(issuer: string) {
  return {
    resource: `${issuer}${MCP_PATH}`,
    authorization_servers: [issuer],
    bearer_methods_supported: ["header"],
    resource_name: "relayctl",
    // What the tools need (docs/people-and-cli.md#oauth-scopes): no admin, which no tool uses.
    scopes_supported: ["read", "deploy", "exec"],
    resource_documentation: `${issuer}/device`,
  };
}

function webRequest(req: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  return new Request(`${req.protocol}://${req.host}${req.url}`, { method: req.method, headers });
}

/** The progress of a deployment of `tenantId` (null for another tenant's or an unknown one). */
function progressReader(db: Knex, tenantId: string): ProgressReader {
  return async (deploymentId, afterSeq) => {
    const own = await db("deployments").where({ id: deploymentId, tenant_id: tenantId }).first("id");
    return own ? progressSince(db, deploymentId, afterSeq) : null;
  };
}

/**
 * A tool's needs of a person, from the route manifest: those of the route it names,
 * else of the Automation API route of its operation scope, else a read's.
 */
function toolNeeds(root: FastifyInstance): ToolNeeds {
  const byScope = new Map<string, Needs>();
  const byRoute = new Map<string, Needs>();
  for (const spec of manifestOf(root)) {
    const needs = needsOf(spec);
    if (needs) for (const m of [spec.method].flat()) byRoute.set(`${m} ${spec.url}`, needs);
    if (needs && "scope" in spec.access && spec.access.scope && spec.url.startsWith(AUTOMATION_API))
      if (!byScope.has(spec.access.scope)) byScope.set(spec.access.scope, needs);
  }
  return (tool) =>
    (tool.route && byRoute.get(tool.route)) || (tool.needs && byScope.get(tool.needs)) || { role: "viewer" };
}

async function handle(ctx: ApiContext, root: FastifyInstance, req: FastifyRequest, reply: FastifyReply) {
  const body = req.body as { method?: unknown } | undefined;
  const server = buildMcpServer(
    req.principal,
    (tool) => injectCaller(root, String(req.headers.authorization), req.ip, tool),
    // Listing shows what the credential may use; a call reaches the API whatever it is.
    {
      listAll: body?.method === "tools/call",
      readProgress: progressReader(ctx.db, req.principal.tenantId),
      needs: toolNeeds(root),
    },
  );
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  await server.connect(transport);
  const res = await transport.handleRequest(webRequest(req), { parsedBody: body });
  reply.status(res.status);
  res.headers.forEach((value, name) => reply.header(name, value));
  reply.raw.on("close", () => void server.close());
  if (!res.body) return reply.send();
  return reply.send(Readable.fromWeb(res.body as unknown as NodeWebStream));
}

/**
 * The MCP endpoint's routes. `root` is the app they are registered on: a tool
 * call is a request to the API through it (app.inject), with the caller's own
 * credential.
 */
export function mcpRoutes(ctx: ApiContext, root: FastifyInstance): RouteSpec[] {
  const metadata = (path: string) =>
    route({
      method: "GET",
      url: path,
      access: { public: "RFC 9728: where to get a token for /mcp, public by design" },
      tag: "people",
      handler: async (req) => resourceMetadata(issuerOf(ctx, req)),
    });
  // A refusal points to the metadata (the MCP authorization spec).
  const onSend = async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (reply.statusCode === 401)
      reply.header(
        "www-authenticate",
        `Bearer resource_metadata="${issuerOf(ctx, req)}${METADATA_PATH}${MCP_PATH}"`,
      );
    return payload;
  };
  return [
    // Path-inserted form first (what MCP clients ask for /mcp), then the root form.
    metadata(`${METADATA_PATH}${MCP_PATH}`),
    metadata(METADATA_PATH),
    route({
      method: "POST",
      url: MCP_PATH,
      access: { credentials: AUTOMATION, role: "viewer" },
      tag: "mcp",
      options: { onSend },
      handler: (req, reply) => handle(ctx, root, req, reply),
    }),
    // Stateless: no session to end, and no server-initiated message outside a
    // request, so no standalone GET stream (which would idle open forever).
    route({
      method: ["GET", "DELETE"],
      url: MCP_PATH,
      access: { credentials: AUTOMATION, role: "viewer" },
      tag: "mcp",
      options: { onSend },
      handler: async (_req, reply) =>
        reply
          .status(405)
          .header("allow", "POST")
          .send({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "Method not allowed." } }),
    }),
  ];
}
