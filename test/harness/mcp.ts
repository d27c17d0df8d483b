// What the MCP tests share (mcp.test.ts, mcp-deploy.test.ts): a cluster whose agent runs podman
// containers, an operator's API key and a signed-in person's OAuth token, the official SDK's
// client over Streamable HTTP at /mcp and over stdio through the built `relayctl mcp`, and what
// the tests read back (tool names, a result's text, an operation's audit payload).
import { randomBytes } from "node:crypto";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { makeTempDir, onCleanup } from "./cleanup";
import { CLI_MAIN } from "./cli";
import { type Cluster, startCluster } from "./cluster";
import { buildBaseImage, podmanAgentEnv } from "./containers";
import { request } from "./http";
import { Browser, createOwner, deviceTokens } from "./people";

export interface McpStack {
  c: Cluster;
  /** An operator's API key (x-api-key). */
  apiKey: string;
  /** A person's OAuth access token from the device flow. */
  personToken: string;
  /** The person's signed-in browser session (approves device logins). */
  browser: Browser;
}

/** The tools a person's token lists. */
export const ALL_TOOLS = [
  "application_logs",
  "create_preview",
  "deploy_application",
  "exec_command",
  "get_application",
  "get_deployment",
  "get_operation",
  "list_applications",
  "list_audit_events",
  "list_operations",
  "list_previews",
  "list_releases",
  "list_servers",
  "remove_preview",
  "restart_container",
  "rollback_application",
];

/** A cluster for MCP calls, an API key and a signed-in person with a device-flow token. */
export async function startMcpStack(): Promise<McpStack> {
  await buildBaseImage();
  const c = await startCluster({
    serverEnv: { RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: "1" },
    agentEnv: { ...podmanAgentEnv, RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: "1" },
  });
  const apiKey = String(
    (await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "mcp-admin"])).key,
  );
  const owner = await createOwner(c.db.url, c.tenantId);
  const browser = new Browser(c.baseUrl);
  await browser.signIn(owner);
  const personToken = (await deviceTokens(c.baseUrl, browser)).access_token;
  return { c, apiKey, personToken, browser };
}

async function connect(client: Client, transport: StreamableHTTPClientTransport | StdioClientTransport) {
  await client.connect(transport);
  onCleanup(() => client.close());
  return client;
}

/** An SDK client on the cluster's /mcp with `token` as its bearer. */
export const httpClient = (c: Cluster, token: string) =>
  connect(
    new Client({ name: "relayctl-test", version: "1.0.0" }),
    new StreamableHTTPClientTransport(new URL(`${c.baseUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );

/** An SDK client on `relayctl mcp` over stdio: `token` in RELAYCTL_TOKEN, or none (the CLI's stored login). */
export const stdioClient = (c: Cluster, token: string | null, configDir = makeTempDir("mcp-cli")) =>
  connect(
    new Client({ name: "relayctl-test", version: "1.0.0" }),
    new StdioClientTransport({
      command: process.execPath,
      args: [CLI_MAIN, "mcp"],
      env: {
        PATH: String(process.env.PATH),
        RELAYCTL_URL: c.baseUrl,
        ...(token === null ? {} : { RELAYCTL_TOKEN: token }),
        RELAYCTL_CONFIG_DIR: configDir,
      },
      stderr: "pipe",
    }),
  );

/** An automation key with these operations only, made through the API as an operator would. */
export async function scopedKey(
  c: Cluster,
  apiKey: string,
  operations: string[],
): Promise<{ id: string; key: string }> {
  const res = await request(c, "/api/automation-keys", {
    key: null,
    headers: { "x-api-key": apiKey },
    body: { name: `mcp-${randomBytes(3).toString("hex")}`, operations },
  });
  if (res.status !== 201) throw new Error(`create key: ${res.status} ${res.text}`);
  return { id: String(res.json.id), key: String(res.json.key) };
}

export const names = (tools: { name: string }[]) => tools.map((t) => t.name).sort();
export const textOf = (r: { content?: unknown }) =>
  ((r.content ?? []) as { type: string; text?: string }[]).map((p) => p.text ?? "").join("\n");

/** The payloads of the operation's audit events of `eventType`. */
export async function auditPayload(c: Cluster, operationId: string, eventType: string) {
  const rows = await c.db.query(
    "SELECT payload FROM audit_events WHERE operation_id = ? AND event_type = ?",
    [operationId, eventType],
  );
  return rows.map((r) => JSON.parse(String(r.payload)) as Record<string, unknown>);
}
