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

/** A server id from its name or id (an id is used as is: an automation key cannot list servers). */
export async function serverId(api: Api, nameOrId: string): Promise<string> {
  if (UUID.test(nameOrId.toLowerCase())) return nameOrId;
  const { servers } = await api.call<{ servers: { id: string; name: string }[] }>(
    "GET",
    "/api/servers",
    "dashboard",
  );
  const s = servers.find((x) => x.name === nameOrId);
  if (!s) throw new CliError(`server '${nameOrId}' not found`, EXIT.refused);
  return s.id;
}

export interface AppRef {
  id: string;
  name: string;
}

export async function application(api: Api, nameOrId: string): Promise<AppRef & Record<string, unknown>> {
  const { applications } = await api.call<{ applications: (AppRef & Record<string, unknown>)[] }>(
    "GET",
    "/api/applications",
    "dashboard",
  );
  const a = applications.find((x) => x.id === nameOrId.toLowerCase() || x.name === nameOrId);
  if (!a) throw new CliError(`application '${nameOrId}' not found`, EXIT.refused);
  return a;
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
