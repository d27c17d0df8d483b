// DigitalOcean: POST /droplets/{id}/actions {"type": "reboot"} with a Bearer
// token → 201 {"action": {"id", "status": "in-progress", "type": "reboot", ...}}.
// Errors: {"id": "unauthorized", "message": "..."} (docs.digitalocean.com API reference).
import { type CloudProvider, ProviderError, postJson } from "./provider.js";

interface DigitalOceanAnswer {
  action?: { id?: number | string };
  id?: string;
  message?: string;
}

export function digitalOcean(baseUrl: string): CloudProvider {
  return {
    async reboot(dropletId, token) {
      const url = `${baseUrl}/droplets/${encodeURIComponent(dropletId)}/actions`;
      const json = (await postJson("DigitalOcean", url, token, { type: "reboot" }, (j) => {
        const e = j as DigitalOceanAnswer | undefined;
        return e?.message ? `${e.id ? `${e.id}: ` : ""}${e.message}` : undefined;
      })) as DigitalOceanAnswer | undefined;
      if (json?.action?.id === undefined)
        throw new ProviderError("DigitalOcean API: no action in the answer");
      return { actionId: String(json.action.id) };
    },
  };
}
