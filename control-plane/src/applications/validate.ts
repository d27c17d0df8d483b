// Application fields checked beyond what the JSON schema can say: domain names
// (RFC 1123 labels, optional leading `*.`), normalised to lower case without a
// trailing dot. The same rules run again on the agent before a proxy sees them.
import { normalizeFqdn, validFqdn } from "@relayctl/reverse-proxy-sync";
import { RcError } from "../errors.js";

export const MAX_FQDNS = 100;

/** Normalised, de-duplicated, sorted; 422 naming the first bad entry. */
export function compileFqdns(input: string[]): string[] {
  const out = new Set<string>();
  input.forEach((raw, i) => {
    const fqdn = normalizeFqdn(raw);
    if (!validFqdn(fqdn)) {
      throw new RcError(
        "RC_ERR_VALIDATION",
        `fqdns[${i}]: '${raw.slice(0, 300)}' is not a valid domain name (RFC 1123 labels, at least two, optional leading '*.')`,
      );
    }
    out.add(fqdn);
  });
  return [...out].sort();
}

// docker's rule for container names (daemon/names.RestrictedNamePattern).
export const CONTAINER_NAME_PATTERN = "^[a-zA-Z0-9][a-zA-Z0-9_.-]*$";
