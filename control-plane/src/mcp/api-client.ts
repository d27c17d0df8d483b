// The MCP tools' one way to relayctl: the control plane's own HTTP API, called
// in-process (Fastify's inject) with the caller's own credential. So every tool
// call passes the same authentication, scope checks, rate limit, validation,
// scrubbing and audit as a curl or CLI call — there is no MCP back door into
// the database (DESIGN.md: the MCP server is a client of the public API).
import type { FastifyInstance } from "fastify";
import { MCP_MARK_HEADER, mcpMark } from "./marker.js";

/** An answer of the API that was not 2xx; `detail` is the API's own. */
export class ApiRefusal extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
  }
}

export interface ApiCaller {
  /** One JSON request; the parsed body of a 2xx answer, else an ApiRefusal. */
  json<T = Record<string, unknown>>(
    method: "GET" | "POST" | "DELETE",
    path: string,
    body?: unknown,
  ): Promise<T>;
  /** A text/event-stream answer as it arrives (the deployment live log). */
  stream(path: string, signal: AbortSignal): Promise<NodeJS.ReadableStream>;
}

function detailOf(status: number, text: string): string {
  try {
    const body = JSON.parse(text) as { detail?: string };
    if (typeof body.detail === "string") return body.detail;
  } catch {
    // not JSON
  }
  return `HTTP ${status}`;
}

/** A caller bound to one request's credential, remote address and tool name. */
export function injectCaller(
  app: FastifyInstance,
  authorization: string,
  remoteAddress: string,
  tool: string,
): ApiCaller {
  const headers = { authorization, [MCP_MARK_HEADER]: mcpMark(tool), accept: "application/json" };
  return {
    async json(method, path, body) {
      const res = await app.inject({
        method,
        url: path,
        headers: body === undefined ? headers : { ...headers, "content-type": "application/json" },
        payload: body === undefined ? undefined : JSON.stringify(body),
        remoteAddress,
      });
      if (res.statusCode < 200 || res.statusCode > 299)
        throw new ApiRefusal(res.statusCode, detailOf(res.statusCode, res.body));
      return (res.body ? JSON.parse(res.body) : {}) as never;
    },
    async stream(path, signal) {
      const res = await app.inject({
        method: "GET",
        url: path,
        headers: { ...headers, accept: "text/event-stream" },
        remoteAddress,
        payloadAsStream: true,
        signal,
      });
      if (res.statusCode !== 200) {
        let text = "";
        for await (const chunk of res.stream()) text += String(chunk);
        throw new ApiRefusal(res.statusCode, detailOf(res.statusCode, text));
      }
      return res.stream();
    },
  };
}
