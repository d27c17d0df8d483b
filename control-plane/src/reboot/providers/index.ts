// Picks the CloudProvider adapter of a binding.
import { digitalOcean } from "./digitalocean.js";
import { hetzner } from "./hetzner.js";
import type { CloudProvider, ProviderName } from "./provider.js";

export function cloudProvider(name: ProviderName, baseUrls: Record<ProviderName, string>): CloudProvider {
  return name === "hetzner" ? hetzner(baseUrls.hetzner) : digitalOcean(baseUrls.digitalocean);
}
