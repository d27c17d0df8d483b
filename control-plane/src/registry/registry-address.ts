// A registry address as a user writes it ("", "docker.io", "https://ghcr.io/",
// "123.dkr.ecr.eu-west-1.amazonaws.com") → the address the engine logs in to and
// the provider type the contract reports as registry_type.
//
// Docker Hub resolves to "https://index.docker.io/v1/": the key the docker CLI
// itself uses for Hub in config.json, so login and logout name the same entry.
// Other registries resolve to host[:port], lower-case, without scheme or path.

export type RegistryType =
  | "dockerhub"
  | "ghcr"
  | "ecr"
  | "gcr"
  | "artifact-registry"
  | "acr"
  | "gitlab"
  | "quay"
  | "generic";

export interface ResolvedRegistry {
  registry_url: string;
  registry_type: RegistryType;
}

export const DOCKER_HUB_URL = "https://index.docker.io/v1/";

const DOCKER_HUB_HOSTS = new Set([
  "docker.io",
  "index.docker.io",
  "registry-1.docker.io",
  "registry.hub.docker.com",
]);

/** host[:port] (IPv6 in brackets), no user info; port 1-65535. */
const HOST = /^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)(:\d{1,5})?$/;

export class InvalidRegistryAddress extends Error {}

/** Host part of an address: scheme, path, query and trailing slashes removed. */
function hostOf(address: string): string {
  const bare = address
    .trim()
    .toLowerCase()
    .replace(/^[a-z][a-z0-9+.-]*:\/\//, "");
  const host = bare.split(/[/?#]/, 1)[0] ?? "";
  const port = /:(\d+)$/.exec(host)?.[1];
  if (!HOST.test(host) || (port !== undefined && (Number(port) < 1 || Number(port) > 65535))) {
    throw new InvalidRegistryAddress(
      `'${address}' is not a registry address (host[:port], optionally with https://)`,
    );
  }
  return host;
}

export function registryType(host: string): RegistryType {
  const name = host.replace(/:\d+$/, "");
  if (DOCKER_HUB_HOSTS.has(name)) return "dockerhub";
  if (name === "ghcr.io") return "ghcr";
  if (/^\d{12}\.dkr\.ecr(-fips)?\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$/.test(name) || name === "public.ecr.aws")
    return "ecr";
  if (name === "gcr.io" || name.endsWith(".gcr.io")) return "gcr";
  if (name.endsWith("-docker.pkg.dev")) return "artifact-registry";
  if (name.endsWith(".azurecr.io") || name.endsWith(".azurecr.cn") || name.endsWith(".azurecr.us"))
    return "acr";
  if (name === "registry.gitlab.com" || name.split(".").includes("gitlab")) return "gitlab";
  if (name === "quay.io" || name.endsWith(".quay.io")) return "quay";
  return "generic";
}

/** Throws InvalidRegistryAddress for something that is no registry address. */
export function resolveRegistry(address: string): ResolvedRegistry {
  if (address.trim() === "") return { registry_url: DOCKER_HUB_URL, registry_type: "dockerhub" };
  const host = hostOf(address);
  const type = registryType(host);
  if (type === "dockerhub") return { registry_url: DOCKER_HUB_URL, registry_type: type };
  return { registry_url: host, registry_type: type };
}
