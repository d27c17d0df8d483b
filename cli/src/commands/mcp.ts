// relayctl mcp: the MCP server for AI coding tools that start a local process
// (stdio). It holds no tools of its own: it relays MCP messages between stdio
// and the control plane's Streamable HTTP endpoint (/mcp) with this CLI's
// credential (--token, RELAYCTL_TOKEN or the stored login, refreshed as it
// expires), so both transports offer exactly the same tools, scopes and audit.
// Both ends are the official SDK's transports; stdout carries only protocol.
import type { JSONRPCMessage } from "@modelcontextprotocol/server";
import type { Command } from "commander";
import { type Api, errorLine } from "../client.js";
import { ctxOf } from "../context.js";

/** fetch with the CLI's credential; a stored login's token that just expired is refreshed once. */
function authorizedFetch(api: Api): typeof fetch {
  return async (input, init) => {
    for (let attempt = 0; ; attempt++) {
      const headers = new Headers(init?.headers);
      headers.set("authorization", `Bearer ${await api.bearer()}`);
      const res = await fetch(input, { ...init, headers });
      if (res.status !== 401 || attempt > 0) return res;
      const detail = errorLine(401, await res.clone().text());
      if (!api.canRefreshAfter(detail)) return res;
      await api.refresh();
    }
  };
}

/** A request the control plane did not answer (refused credential, unreachable) still gets a JSON-RPC answer. */
function failure(message: JSONRPCMessage, err: unknown): JSONRPCMessage | undefined {
  if (!("method" in message) || !("id" in message)) return undefined;
  const text = err instanceof Error ? err.message : String(err);
  return { jsonrpc: "2.0", id: message.id, error: { code: -32000, message: `relayctl: ${text}` } };
}

export async function relayStdio(api: Api): Promise<void> {
  // Loaded by this command only: the SDK is two thirds of every other command's start (0.2 s of CPU).
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  const { StdioServerTransport } = await import("@modelcontextprotocol/server/stdio");
  const upstream = new StreamableHTTPClientTransport(new URL(`${api.baseUrl}/mcp`), {
    fetch: authorizedFetch(api),
  });
  const local = new StdioServerTransport();
  local.onmessage = (message) => {
    upstream.send(message).catch((err: unknown) => {
      const answer = failure(message, err);
      if (answer) void local.send(answer);
    });
  };
  upstream.onmessage = (message) => {
    // The client end negotiated a version: later HTTP requests must carry it in their header.
    const result = "result" in message ? (message.result as { protocolVersion?: unknown }) : undefined;
    if (typeof result?.protocolVersion === "string") upstream.setProtocolVersion?.(result.protocolVersion);
    void local.send(message);
  };
  const closed = new Promise<void>((resolve) => {
    local.onclose = resolve;
  });
  local.onerror = (err) => process.stderr.write(`relayctl mcp: ${err.message}\n`);
  upstream.onerror = (err) => process.stderr.write(`relayctl mcp: ${err.message}\n`);
  await upstream.start();
  await local.start();
  await closed;
  await upstream.close();
}

export function registerMcp(program: Command): void {
  program
    .command("mcp")
    .description("serve relayctl's MCP tools over stdio, for AI coding tools (Claude Code, Cursor, VS Code)")
    .addHelpText(
      "after",
      "\nExample (Claude Code):\n  claude mcp add relayctl -- relayctl mcp\n  RELAYCTL_TOKEN=rca_... relayctl mcp   # a key's scopes instead of your login",
    )
    .action(async (_o: unknown, cmd: Command) => {
      await relayStdio(ctxOf(cmd).api);
    });
}
