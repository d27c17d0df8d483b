// One MCP server per HTTP request (the transport is stateless: any api instance
// answers any request), holding the tools the caller's credential may use. A
// tool outside its scope is not listed; a tools/call of one is still dispatched,
// so the API refuses it with its own detail (403, the same words a curl gets).
import { McpServer } from "@modelcontextprotocol/server";
import type { CallToolResult } from "@modelcontextprotocol/server";
import { z } from "zod";
import type { Principal } from "../auth/principal.js";
import { type Needs, personRefusal } from "../auth/roles.js";
import { ApiRefusal, type ApiCaller } from "./api-client.js";
import type { ProgressReader } from "./deploy-follow.js";
import { TOOLS, type ToolSpec } from "./tools.js";

export const SERVER_INFO = { name: "relayctl", version: "1.0.0" };
/** How often a running tool call with a progress token reports that it is still running. */
export const HEARTBEAT_MS = 5000;

/**
 * What a tool needs of a person: what the Automation API route of its operation
 * declares (read from the route manifest), else a viewer's read.
 */
export type ToolNeeds = (tool: ToolSpec) => Needs;

/** Whether the credential may use the tool: a person by role and grant; a key its operations, never the dashboard API. */
export function allowed(tool: ToolSpec, p: Principal, needs: ToolNeeds): boolean {
  if (p.user) return personRefusal(p.user, needs(tool), p.scopes) === null;
  if (tool.needs === "dashboard") return false;
  return tool.needs === null || p.operations.length === 0 || p.operations.includes(tool.needs);
}

function resultOf(structured: Record<string, unknown>): CallToolResult {
  return {
    content: [{ type: "text", text: JSON.stringify(structured, null, 2) }],
    structuredContent: structured,
  };
}

export function buildMcpServer(
  principal: Principal,
  apiFor: (tool: string) => ApiCaller,
  opts: { listAll: boolean; readProgress: ProgressReader; needs: ToolNeeds },
): McpServer {
  const server = new McpServer(SERVER_INFO, {
    capabilities: { tools: { listChanged: false } },
    instructions:
      "relayctl: servers, applications, deployments and operations of one organization. Read with list_*/get_*; act with exec_command, deploy_application, restart_container where the credential allows.",
  });
  for (const tool of TOOLS) {
    const mayUse = allowed(tool, principal, opts.needs);
    if (!opts.listAll && !mayUse) continue;
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        // An out-of-scope call goes to the API as it is, which checks the scope
        // before the body: the caller gets the scope refusal and learns nothing
        // about the body rules, as over HTTP.
        inputSchema: mayUse ? tool.input : z.looseObject({}),
        outputSchema: tool.output,
        annotations: { title: tool.title, ...tool.annotations },
      },
      async (args: unknown, ctx) => {
        const token = ctx.mcpReq._meta?.progressToken;
        let progress = 0;
        let lastSent = Date.now();
        const send = async (message: string) => {
          if (token === undefined) return;
          progress += 1;
          lastSent = Date.now();
          await ctx.mcpReq.notify({
            method: "notifications/progress",
            params: { progressToken: token, progress, message: message.slice(0, 500) },
          });
        };
        const env = {
          api: apiFor(tool.name),
          person: Boolean(principal.user),
          readProgress: opts.readProgress,
          signal: ctx.mcpReq.signal,
          progress: (p: { step: string; status: string; log?: string }) =>
            send(
              `${p.step}: ${p.status}${p.log ? ` — ${p.log.split("\n").filter(Boolean).at(-1) ?? ""}` : ""}`,
            ),
        };
        // A call that runs long (a command waiting up to 900 s, a deploy between
        // steps) says it is still running, so a client that resets its request
        // timeout on progress does not give up on it.
        const started = Date.now();
        const heartbeat =
          token === undefined
            ? undefined
            : setInterval(() => {
                if (Date.now() - lastSent < HEARTBEAT_MS / 2) return;
                const seconds = Math.round((Date.now() - started) / 1000);
                send(`${tool.name}: running, ${seconds} s`).catch(() => {});
              }, HEARTBEAT_MS);
        try {
          return resultOf(await tool.run(args as never, env));
        } catch (err) {
          if (err instanceof ApiRefusal) {
            const hint =
              tool.needs === "dashboard" && !principal.user
                ? " (this tool reads the dashboard API, which takes a person's login, not an automation key)"
                : "";
            return {
              isError: true,
              content: [{ type: "text", text: `HTTP ${err.status}: ${err.detail}${hint}` }],
            };
          }
          throw err;
        } finally {
          clearInterval(heartbeat);
        }
      },
    );
  }
  return server;
}
