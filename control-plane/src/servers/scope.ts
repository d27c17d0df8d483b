// A key's server scope: the one check of whether a principal may act on a server.
import type { Principal } from "../auth/principal.js";
import { RcError } from "../errors.js";
import type { ServerRef } from "../operations/outcome.js";

/** 403 unless the principal's server scope holds `server` (an empty scope holds every server of its tenant). */
export function requireServerScope(principal: Principal, server: ServerRef): void {
  if (principal.servers.length > 0 && !principal.servers.includes(server.id)) {
    throw new RcError("RC_ERR_FORBIDDEN", `server '${server.name}' is outside this key's server scope`);
  }
}
