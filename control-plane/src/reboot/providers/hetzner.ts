// Hetzner Cloud: POST /servers/{id}/actions/reboot (no body) with a Bearer API
// token → 201 {"action": {"id", "command": "reboot_server", "status": "running", ...}}.
// Errors: {"error": {"code", "message"}} (docs.hetzner.cloud, "Errors").
import { type CloudProvider, ProviderError, postJson } from "./provider.js";

interface HetznerAnswer {
  action?: { id?: number | string };
  error?: { code?: string; message?: string };
}

export function hetzner(baseUrl: string): CloudProvider {
  return {
    async reboot(serverId, token) {
      const url = `${baseUrl}/servers/${encodeURIComponent(serverId)}/actions/reboot`;
      const json = (await postJson("Hetzner Cloud", url, token, undefined, (j) => {
        const e = (j as HetznerAnswer | undefined)?.error;
        return e?.message ? `${e.code ? `${e.code}: ` : ""}${e.message}` : undefined;
      })) as HetznerAnswer | undefined;
      if (json?.action?.id === undefined)
        throw new ProviderError("Hetzner Cloud API: no action in the answer");
      return { actionId: String(json.action.id) };
    },
  };
}
