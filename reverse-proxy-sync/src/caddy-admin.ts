// One request to Caddy's admin API on a connection of its own. Caddy restarts
// its admin server on every config load, closing idle keep-alive connections;
// a pooled client (global fetch) then fails now and again with "other side
// closed" on the request after a load. A fresh loopback connection costs
// ~0.1 ms, so every call gets one.
import { request } from "node:http";

export interface AdminResponse {
  status: number;
  text: string;
  /** The body parsed as JSON, or undefined when it is empty or not JSON. */
  json: unknown;
  /** Caddy's ETag of a config read: a header, or (Caddy 2.6) a trailer after the body. */
  etag?: string;
}

export function caddyAdmin(
  adminUrl: string,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = 30_000,
  /** Sent as is (If-Match of a conditional write). */
  headers: Record<string, string> = {},
): Promise<AdminResponse> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${adminUrl}${path}`,
      {
        method,
        agent: false,
        timeout: timeoutMs,
        headers:
          payload === undefined
            ? headers
            : {
                ...headers,
                "content-type": "application/json",
                "content-length": Buffer.byteLength(payload),
              },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let json: unknown;
          try {
            json = text.length > 0 ? JSON.parse(text) : undefined;
          } catch {
            json = undefined;
          }
          const etag = res.headers.etag ?? res.trailers.etag;
          resolve({ status: res.statusCode ?? 0, text, json, ...(etag ? { etag } : {}) });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(payload);
  });
}
