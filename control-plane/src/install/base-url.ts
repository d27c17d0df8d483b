// The base URL written into the installers this folder serves (/install.sh, /cli/install.sh) and
// into the download URLs they follow: RELAYCTL_PUBLIC_URL, else (loopback only, http/edge.ts) the
// scheme and Host the request came to, refused when the Host header holds anything a shell would read.
import type { FastifyRequest } from "fastify";
import type { Config } from "../config.js";
import { RcError } from "../errors.js";
import { publicBaseUrl } from "../http/edge.js";

// A host name or an IP, with an optional port, and nothing a shell would read: the value ends up
// inside a script people pipe into `sh` (and `sudo sh`).
const HOST = /^([A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$/;

/** The control plane's base URL as installers must see it, or RC_ERR_BAD_REQUEST. */
export function installBaseUrl(config: Config, req: FastifyRequest): string {
  if (config.publicUrl ?? config.accounts.publicUrl) return publicBaseUrl(config, req);
  if (!HOST.test(req.host)) {
    throw new RcError("RC_ERR_BAD_REQUEST", "Host header is not a host name: set RELAYCTL_PUBLIC_URL");
  }
  // Only a loopback name off a loopback listener (http/edge.ts): never a forged Host.
  return publicBaseUrl(config, req);
}

/** The script with its `base_url='...'  # @control-plane-url` line set to baseUrl. */
export function fillBaseUrl(script: string, baseUrl: string): string {
  return script.replace(/^base_url='[^'\n]*'(?= {2}# @control-plane-url)/m, `base_url='${baseUrl}'`);
}
