// The MCP marker of the audit trail: the MCP endpoint's in-process API calls
// carry a header with this process's random nonce and the tool's name, and the
// audit fields of an operation record `via: {client: "mcp", tool}` when the
// nonce matches. A caller from outside cannot know the nonce, so it cannot
// label its own calls as MCP's (or hide them as someone else's).
import { randomBytes } from "node:crypto";
import type { FastifyRequest } from "fastify";

export const MCP_MARK_HEADER = "x-relayctl-mcp";
const NONCE = randomBytes(16).toString("hex");

export const mcpMark = (tool: string) => `${NONCE} ${tool}`;

/** `{via: {client: "mcp", tool}}` for a call of the MCP endpoint, else nothing. */
export function viaOf(req: FastifyRequest): { via?: { client: "mcp"; tool: string } } {
  const value = req.headers[MCP_MARK_HEADER];
  if (typeof value !== "string") return {};
  const [nonce, tool] = value.split(" ");
  return nonce === NONCE && tool ? { via: { client: "mcp", tool } } : {};
}
