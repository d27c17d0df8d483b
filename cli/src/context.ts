// What every command needs: the API client built from the global options, the
// --json switch, and lookups of servers and applications by name or id.
import { UUID } from "@relayctl/reverse-proxy-sync/uuid";
import type { Command } from "commander";
import { Api, type GlobalOptions } from "./client.js";
import { CliError, EXIT } from "./errors.js";

export interface Ctx {
  api: Api;
  json: boolean;
}

export function ctxOf(cmd: Command): Ctx {
  const opts = cmd.optsWithGlobals() as GlobalOptions;
  return { api: new Api(opts), json: Boolean(opts.json) };
}

/** Whether the credential is an automation (rca_) key: the Automation API only, no listings. */
export function isAutomationKey(api: Api): boolean {
  return (api.opts.token ?? process.env.RELAYCTL_TOKEN ?? "").startsWith("rca_");
}

/**
 * Application names are looked up in the organization's list, which an
 * automation key may not read (it acts on servers and operations by id): say so,
 * and how to go on, instead of the API's "missing X-API-Key header".
 */
function namesNeedListing(api: Api, name: string): void {
  if (!isAutomationKey(api)) return;
  if (UUID.test(name.toLowerCase()))
    throw new CliError(
      "an automation (rca_) key cannot read applications: run this with your login ('relayctl login') or an rck_ API key",
      EXIT.usage,
    );
  throw new CliError(
    `application '${name}': an automation (rca_) key cannot look applications up by name; pass the application's id (shown by 'relayctl apps list' when logged in or with an rck_ API key), or run this with your login ('relayctl login') or an rck_ API key`,
    EXIT.usage,
  );
}

/**
 * A server id from its name or id (an id is used as is). An automation key reads
 * the names of the servers in its scope from the Automation API; a person or an
 * API key the organization's list.
 */
export async function serverId(api: Api, nameOrId: string): Promise<string> {
  if (UUID.test(nameOrId.toLowerCase())) return nameOrId;
  const automation = isAutomationKey(api);
  const { servers } = await api.call<{ servers: { id: string; name: string }[] }>(
    "GET",
    automation ? "/api/automation/v1/servers" : "/api/servers",
    automation ? "automation" : "dashboard",
  );
  const s = servers.find((x) => x.name === nameOrId);
  if (!s)
    throw new CliError(
      `server '${nameOrId}' not found${automation ? " among the servers this key may use" : ""}`,
      EXIT.refused,
    );
  return s.id;
}

export interface AppRef {
  id: string;
  name: string;
}

export async function application(api: Api, nameOrId: string): Promise<AppRef & Record<string, unknown>> {
  namesNeedListing(api, nameOrId);
  const { applications } = await api.call<{ applications: (AppRef & Record<string, unknown>)[] }>(
    "GET",
    "/api/applications",
    "dashboard",
  );
  const a = applications.find((x) => x.id === nameOrId.toLowerCase() || x.name === nameOrId);
  if (a) return a;
  // A preview is an application left out of the list (it is listed under its own): by its id.
  if (UUID.test(nameOrId.toLowerCase()))
    return api.call<AppRef & Record<string, unknown>>(
      "GET",
      `/api/applications/${nameOrId.toLowerCase()}`,
      "dashboard",
    );
  throw new CliError(`application '${nameOrId}' not found`, EXIT.refused);
}

/** The caller's tenant (for the /api/tenants/{id}/... routes). */
export async function tenantId(api: Api): Promise<string> {
  const me = await api.call<{ tenant_id: string }>("GET", "/api/me", "dashboard");
  return me.tenant_id;
}

export async function readStdin(): Promise<string> {
  if (process.stdin.isTTY)
    throw new CliError("expected the value on stdin (pipe it in, or use --file)", EXIT.usage);
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** One trailing newline is the shell's (echo, a file's last line), not the secret's. */
export const chompOne = (s: string) => s.replace(/\r?\n$/, "");

export const collect = (value: string, previous: string[] = []) => [...previous, value];
