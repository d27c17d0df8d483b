// What every answer of the api owes the web before any route runs or after it
// answered: a Host header that is a host (400 otherwise, never a 500 further
// in), /mcp refused to a browser page of a foreign origin (the MCP transport's
// DNS-rebinding rule), no caching of /api/ answers (they carry CSRF tokens,
// keys' metadata, operations' output), HSTS when relayctl is served over https,
// and the one place URLs of relayctl itself are made: RELAYCTL_PUBLIC_URL, or
// the Host header only on a loopback listener asked for by a loopback name.
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Config } from "../config.js";
import { RcError } from "../errors.js";

/**
 * RFC 3986 §3.2.2 host (reg-name without percent-encoding, or IP literal) with an
 * optional port, that a URL can be made of: what a Host header may hold.
 * Anything else ("[::1", a slash, a space) is refused.
 */
const HOST_SYNTAX = /^[A-Za-z0-9._~!$&'()*+,;=-]+(:\d{0,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{0,5})?$/;
const isHost = (h: string) => HOST_SYNTAX.test(h) && URL.canParse(`http://${h}/`);

/** A host name (with its port) that only ever names this machine (RFC 6761 for .localhost). */
export function isLoopbackHost(hostWithPort: string): boolean {
  const name = hostWithPort
    .replace(/:\d*$/, "")
    .replace(/^\[(.*)\]$/, "$1")
    .toLowerCase();
  return (
    name === "localhost" ||
    name.endsWith(".localhost") ||
    name === "::1" ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name)
  );
}

const LOOPBACK_LISTEN = new Set(["127.0.0.1", "::1", "localhost"]);

/** True when the api listens on this machine's loopback only (dev, or behind a proxy on the host). */
export const listensOnLoopback = (config: Config): boolean => LOOPBACK_LISTEN.has(config.apiListen.host);

/**
 * relayctl's own base URL, for everything that writes it into an answer (the
 * OAuth issuer, verification_uri, invite links, install commands and scripts):
 * RELAYCTL_PUBLIC_URL; without it (config.ts requires it off loopback) the
 * scheme and Host of the request, only when that Host is a loopback name, so a
 * forged Host can never put another site into a link or a script.
 */
export function publicBaseUrl(config: Config, req: FastifyRequest): string {
  const configured = config.publicUrl ?? config.accounts.publicUrl;
  if (configured) return configured;
  if (!listensOnLoopback(config) || !isLoopbackHost(req.host))
    throw new RcError(
      "RC_ERR_BAD_REQUEST",
      "relayctl's address is not configured: set RELAYCTL_PUBLIC_URL (the Host header is used only for localhost)",
    );
  return `${req.protocol}://${req.host}`;
}

/** The origins a browser page may call /mcp from, besides any loopback one on a loopback listener. */
function mcpOriginAllowed(config: Config, origin: string): boolean {
  const configured = config.publicUrl ?? config.accounts.publicUrl;
  if (configured && origin === new URL(configured).origin) return true;
  if (!listensOnLoopback(config)) return false;
  try {
    const u = new URL(origin);
    return (u.protocol === "http:" || u.protocol === "https:") && isLoopbackHost(u.host);
  } catch {
    return false; // "null" (sandboxed frames, file:) and anything else unparseable
  }
}

declare module "fastify" {
  interface FastifyInstance {
    /** Cookies are Secure when the request came over https or RELAYCTL_PUBLIC_URL is https. */
    secureCookies: boolean;
  }
}

// No includeSubDomains: applications served under relayctl's domain may still be plain http.
const ONE_YEAR = 365 * 24 * 3600;

/** Host headers found to be hosts: most requests bring one of a few, checked once (bounded). */
const knownHosts = new Set<string>();
const MAX_KNOWN_HOSTS = 1_000;

function hostOk(h: string): boolean {
  if (knownHosts.has(h)) return true;
  if (!isHost(h)) return false;
  if (knownHosts.size >= MAX_KNOWN_HOSTS) knownHosts.clear();
  knownHosts.add(h);
  return true;
}

/**
 * Installs the edge's hook on the root app (before any route, so it applies to all). One
 * callback-style onRequest hook does it all: the answer's headers are set before anything else
 * runs (a route that sets cache-control replaces it, and an error's answer keeps it), which
 * spares every request an onSend hook of its own.
 */
export function installEdge(app: FastifyInstance, config: Config, mcpPath: string): void {
  const publicUrl = config.publicUrl ?? config.accounts.publicUrl;
  const httpsPublic = publicUrl?.startsWith("https:") ?? false;
  app.decorate("secureCookies", httpsPublic);

  app.addHook("onRequest", (req, reply, done) => {
    if (httpsPublic || req.protocol === "https")
      reply.header("strict-transport-security", `max-age=${ONE_YEAR}`);
    // Every /api/ answer is about a person's or a tenant's data: never kept by a cache.
    if (req.url.startsWith("/api/")) reply.header("cache-control", "no-store");
    // The raw header and what Fastify made of it (X-Forwarded-Host from a trusted proxy).
    // None at all (HTTP/1.0) is let through: no URL is ever made from it.
    const raw = req.headers.host;
    if ((raw !== undefined && !hostOk(raw)) || (req.host !== "" && !hostOk(req.host))) {
      done(new RcError("RC_ERR_BAD_REQUEST", "Host header is not a host name"));
      return;
    }
    if (req.routeOptions.url === mcpPath) {
      // Clients that are not browsers send no Origin; a browser page always does.
      const origin = req.headers.origin;
      if (origin !== undefined && !mcpOriginAllowed(config, origin)) {
        done(
          new RcError(
            "RC_ERR_FORBIDDEN",
            `a page of origin '${origin.slice(0, 200)}' may not call ${mcpPath}`,
          ),
        );
        return;
      }
    }
    done();
  });
}
