// IP allowlists of automation keys: entries are IPv4/IPv6 addresses or CIDR
// ranges, matched with node:net's BlockList (no extra dependency). An IPv4-mapped
// IPv6 caller (::ffff:10.0.0.1, what a dual-stack listener reports) is matched as
// its IPv4 address, so an IPv4 entry still applies.
import { BlockList, isIP } from "node:net";

export interface AllowlistEntry {
  address: string;
  prefix: number;
  family: "ipv4" | "ipv6";
}

/** Parses one entry; returns null when it is not an address or a CIDR range. */
export function parseAllowlistEntry(entry: string): AllowlistEntry | null {
  const [address, prefixText, ...rest] = entry.trim().split("/");
  if (rest.length > 0) return null;
  const version = isIP(address);
  if (version === 0) return null;
  const max = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return null;
  const prefix = prefixText === undefined ? max : Number(prefixText);
  if (prefix > max) return null;
  return { address, prefix, family: version === 4 ? "ipv4" : "ipv6" };
}

function normalizeCaller(ip: string): { ip: string; family: "ipv4" | "ipv6" } | null {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return { ip: mapped[1], family: "ipv4" };
  const version = isIP(ip);
  if (version === 0) return null;
  return { ip, family: version === 4 ? "ipv4" : "ipv6" };
}

/** True when the list is empty (allow all) or the caller falls in one of its entries. */
export function ipAllowed(allowlist: string[], callerIp: string): boolean {
  if (allowlist.length === 0) return true;
  const caller = normalizeCaller(callerIp);
  if (!caller) return false;
  const list = new BlockList();
  for (const raw of allowlist) {
    const e = parseAllowlistEntry(raw);
    if (e) list.addSubnet(e.address, e.prefix, e.family);
  }
  return list.check(caller.ip, caller.family);
}
