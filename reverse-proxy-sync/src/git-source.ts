// Where an application's git source points, as the control plane (when it is
// stored) and the agent (when it is fetched) both judge it (issue 30, finding
// 12): a local path or file:// reads the agent's own disk (another application's
// repository cache), and a loopback, link-local or private address makes the
// agent send a request to a service of its own machine or network. Both are
// refused unless the operator allows them (RELAYCTL_ALLOW_LOCAL_GIT_SOURCES:
// tests, `make dev`, mirrors on the server). Shared here because the two sides
// must agree on what "local" is.
import { BlockList, isIP } from "node:net";

export type GitSourceTarget =
  | { kind: "local" }
  | {
      kind: "network";
      scheme: "http" | "https" | "ssh" | "git";
      /** The host as written (brackets removed from an IPv6 literal). */
      host: string;
      /** The port written in the URL, or the scheme's default. */
      port: number;
    };

const DEFAULT_PORT = { http: 80, https: 443, ssh: 22, git: 9418 } as const;

/** What a git_repository value reaches: the local disk, or a host over the network. */
export function gitSourceTarget(repository: string): GitSourceTarget {
  const m = /^(https?|ssh|git|file):\/\//i.exec(repository);
  if (m) {
    const scheme = m[1]!.toLowerCase();
    if (scheme === "file") return { kind: "local" };
    const url = new URL(repository);
    const s = scheme as keyof typeof DEFAULT_PORT;
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
    return { kind: "network", scheme: s, host, port: url.port ? Number(url.port) : DEFAULT_PORT[s] };
  }
  // scp-like ssh: [user@]host:path (a colon before any slash).
  const scp = /^(?:[^@/]+@)?(\[[^\]]+\]|[^:/]+):(?!\/\/)/.exec(repository);
  if (scp) return { kind: "network", scheme: "ssh", host: scp[1]!.replace(/^\[(.*)\]$/, "$1"), port: 22 };
  return { kind: "local" };
}

const LOCAL = new BlockList();
for (const [net, bits] of [
  ["0.0.0.0", 8], // "this network"
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata services
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["224.0.0.0", 3], // multicast, reserved, broadcast
] as const)
  LOCAL.addSubnet(net, bits, "ipv4");
for (const [net, bits] of [
  ["::", 127], // unspecified and loopback
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["ff00::", 8], // multicast
] as const)
  LOCAL.addSubnet(net, bits, "ipv6");

/** The IPv4 address an IPv6 one carries (NAT64 64:ff9b::/96, 6to4 2002::/16), if any. */
function embeddedV4(ip: string): string | undefined {
  const lower = ip.toLowerCase();
  const nat64 = /^64:ff9b::(.+)$/.exec(lower);
  if (nat64) {
    const tail = nat64[1]!;
    if (isIP(tail) === 4) return tail;
    const words = tail.split(":").map((w) => Number.parseInt(w || "0", 16));
    if (words.length === 2) return v4([words[0]! >> 8, words[0]! & 255, words[1]! >> 8, words[1]! & 255]);
  }
  const sixToFour = /^2002:([0-9a-f]{1,4}):([0-9a-f]{1,4})(:|$)/.exec(lower);
  if (sixToFour) {
    const a = Number.parseInt(sixToFour[1]!, 16);
    const b = Number.parseInt(sixToFour[2]!, 16);
    return v4([a >> 8, a & 255, b >> 8, b & 255]);
  }
  return undefined;
}

const v4 = (bytes: number[]) => bytes.join(".");

/** A loopback, link-local, private, multicast or unspecified address (v4, v6, v4-mapped v6). */
export function localAddress(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) return LOCAL.check(ip, "ipv4");
  if (family !== 6) return false;
  const inner = embeddedV4(ip);
  return LOCAL.check(ip, "ipv6") || (inner !== undefined && LOCAL.check(inner, "ipv4"));
}

/**
 * Why a host is local without asking DNS (a name for the loopback, an address of
 * a local range in any spelling), or undefined when only DNS can tell.
 */
export function localHostReason(host: string): string | undefined {
  const name = host.toLowerCase().replace(/\.$/, "");
  if (name === "localhost" || name.endsWith(".localhost")) return `${host} names the loopback`;
  // The WHATWG parser spells 127.1, 0x7f.0.0.1 and 2130706433 as 127.0.0.1, as getaddrinfo reads them.
  let canonical = name;
  try {
    canonical = new URL(`http://${isIP(name) === 6 ? `[${name}]` : name}/`).hostname.replace(
      /^\[(.*)\]$/,
      "$1",
    );
  } catch {
    return undefined;
  }
  if (localAddress(canonical)) return `${host} is a loopback, link-local or private address`;
  return undefined;
}
