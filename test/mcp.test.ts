// The MCP server with the official SDK's client, over both transports, against a
// running control plane and agent: Streamable HTTP at /mcp (an rca_ key, a
// person's OAuth token) and stdio through the built `relayctl mcp`. Tool lists
// follow the credential's scope, a command runs and its output comes back (env
// values scrubbed), an out-of-scope call is refused with the API's own detail, a
// revoked key is refused at its next call, and the discovery documents lead to the
// device flow. Deployments, restarts and the CLI's stored login: mcp-deploy.test.ts.
import { randomBytes } from "node:crypto";
import { discoverOAuthProtectedResourceMetadata } from "@modelcontextprotocol/client";
import test from "ava";
import { cleanupAll } from "./harness/cleanup";
import type { Cluster } from "./harness/cluster";
import { request } from "./harness/http";
import {
  ALL_TOOLS,
  httpClient,
  names,
  scopedKey,
  startMcpStack,
  stdioClient,
  textOf,
  auditPayload,
} from "./harness/mcp";

let c: Cluster;
let apiKey: string;
let personToken: string;

const READ_TOOLS = ["application_logs", "get_operation", "list_operations"];
const KEY_TOOLS = [
  "application_logs",
  "deploy_application",
  "exec_command",
  "get_operation",
  "list_operations",
  "restart_container",
  "rollback_application",
];

test.before(async () => {
  ({ c, apiKey, personToken } = await startMcpStack());
});
test.after.always(cleanupAll);

test.serial("mcp - tools follow the credential: a read-only key lists only read tools", async (t) => {
  const full = await httpClient(c, c.key);
  const listed = (await full.listTools()).tools;
  t.deepEqual(names(listed), KEY_TOOLS);
  const exec = listed.find((x) => x.name === "exec_command")!;
  t.like(exec.annotations, { readOnlyHint: false, destructiveHint: true, idempotentHint: false });
  t.deepEqual([...(exec.inputSchema.required ?? [])].sort(), ["command", "server_id"]);
  t.like(exec.inputSchema.properties?.command, { maxLength: 8192 });
  t.truthy(exec.outputSchema);

  const person = await httpClient(c, personToken);
  t.deepEqual(names((await person.listTools()).tools), ALL_TOOLS);

  // A CI key that may only sync external deploys: none of the acting tools.
  const readOnly = await httpClient(c, (await scopedKey(c, apiKey, ["external_deploy"])).key);
  const reads = (await readOnly.listTools()).tools;
  t.deepEqual(names(reads), READ_TOOLS);
  for (const tool of reads)
    t.like(tool.annotations, { readOnlyHint: true, destructiveHint: false }, tool.name);
});

/** [readOnlyHint, destructiveHint, idempotentHint] of each tool. */
const HINTS: Record<string, [boolean, boolean, boolean]> = {
  list_servers: [true, false, true],
  list_applications: [true, false, true],
  get_application: [true, false, true],
  get_deployment: [true, false, true],
  get_operation: [true, false, true],
  list_operations: [true, false, true],
  list_audit_events: [true, false, true],
  application_logs: [true, false, true],
  list_releases: [true, false, true],
  rollback_application: [false, true, false],
  exec_command: [false, true, false],
  deploy_application: [false, true, false],
  restart_container: [false, true, true],
  list_previews: [true, false, true],
  create_preview: [false, false, false],
  remove_preview: [false, true, true],
};

test.serial(
  "mcp - each of the ten tools has an input schema with the API's rules, an output schema and its hints",
  async (t) => {
    const tools = (await (await httpClient(c, personToken)).listTools()).tools;
    t.deepEqual(names(tools), Object.keys(HINTS).sort());
    for (const tool of tools) {
      const [readOnlyHint, destructiveHint, idempotentHint] = HINTS[tool.name]!;
      t.like(tool.annotations, { readOnlyHint, destructiveHint, idempotentHint }, tool.name);
      t.is(tool.inputSchema.type, "object", tool.name);
      t.is(tool.inputSchema.additionalProperties, false, `${tool.name} takes no unknown argument`);
      t.is(tool.outputSchema?.type, "object", `${tool.name} declares its structured result`);
    }
    const props = (name: string) =>
      tools.find((x) => x.name === name)!.inputSchema.properties as Record<string, Record<string, unknown>>;
    t.like(props("exec_command").timeout_seconds, { minimum: 1, maximum: 900 });
    t.like(props("restart_container").container_name, { pattern: "^[a-zA-Z0-9][a-zA-Z0-9_.-]*$" });
    t.like(props("deploy_application").timeout_seconds, { minimum: 1, maximum: 3600 });

    // Bad arguments are refused before anything runs, on the rules the API itself applies.
    const client = await httpClient(c, c.key);
    const bad: [string, Record<string, unknown>, string][] = [
      ["exec_command", { server_id: c.serverId, command: "true", timeout_seconds: 901 }, "/exec"],
      ["exec_command", { server_id: c.serverId, command: "x".repeat(8193) }, "/exec"],
      ["restart_container", { server_id: c.serverId, container_name: "-no such name" }, "/restart"],
      ["exec_command", { server_id: c.serverId, command: "true", shell: "bash" }, "/exec"],
    ];
    for (const [name, args, route] of bad) {
      const direct = await request(c, `/api/automation/v1${route}`, { body: { ...args, run_id: "mcp-bad" } });
      t.is(direct.status, 422, `the API refuses ${JSON.stringify(args).slice(0, 80)} too`);
      const r = await client.callTool({ name, arguments: { ...args, run_id: "mcp-bad" } });
      t.true(r.isError);
      t.regex(textOf(r), new RegExp(`^Input validation error: Invalid arguments for tool ${name}`));
    }
    const ops = await client.callTool({ name: "list_operations", arguments: { run_id: "mcp-bad" } });
    t.deepEqual((ops.structuredContent as { operations: unknown[] }).operations, []);
  },
);

test.serial(
  "mcp - exec_command over stdio returns the output, scrubbed, and is audited as MCP's",
  async (t) => {
    const client = await stdioClient(c, c.key);
    t.deepEqual(names((await client.listTools()).tools), KEY_TOOLS);
    const secret = `s3cret-${randomBytes(6).toString("hex")}`;
    const r = await client.callTool({
      name: "exec_command",
      arguments: {
        server_id: c.serverId,
        command: 'echo "hello from mcp"; echo "token=$API_TOKEN"; echo oops >&2; exit 3',
        env: { API_TOKEN: secret },
        timeout_seconds: 30,
      },
    });
    t.falsy(r.isError, textOf(r));
    const out = r.structuredContent as Record<string, unknown>;
    t.like(out, { status: "completed", exit_code: 3 });
    t.regex(String(out.stdout), /hello from mcp/);
    t.regex(String(out.stderr), /oops/);
    t.false(JSON.stringify(r).includes(secret), "the env value never comes back");

    const [event] = await auditPayload(c, String(out.operation_id), "operation.exec");
    t.like(event, { via: { client: "mcp", tool: "exec_command" }, key_id: c.keyId, env_keys: ["API_TOKEN"] });
    t.false(JSON.stringify(event).includes(secret));

    const again = await client.callTool({
      name: "get_operation",
      arguments: { operation_id: out.operation_id },
    });
    t.like(again.structuredContent, { operation_id: out.operation_id, result: { exit_code: 3 } });
  },
);

test.serial(
  "mcp - a long exec_command reports that it is still running, so a client's timeout resets",
  async (t) => {
    const client = await httpClient(c, c.key);
    const progress: string[] = [];
    // The client gives up after 12 s without a word; the command takes 15.
    const r = await client.callTool(
      {
        name: "exec_command",
        arguments: { server_id: c.serverId, command: "sleep 15; echo finished", timeout_seconds: 60 },
      },
      { onprogress: (p) => progress.push(String(p.message)), timeout: 12_000, resetTimeoutOnProgress: true },
    );
    t.falsy(r.isError, textOf(r));
    t.like(r.structuredContent, { status: "completed", exit_code: 0, stdout: "finished\n" });
    t.true(progress.length >= 2, progress.join(" | "));
    for (const m of progress) t.regex(m, /^exec_command: running, \d+ s$/);
  },
);

test.serial("mcp - a tool outside the key's scope is refused with the API's detail", async (t) => {
  const { key } = await scopedKey(c, apiKey, ["external_deploy"]);
  const direct = await request(c, "/api/automation/v1/exec", {
    key,
    body: { server_id: c.serverId, command: "true" },
  });
  t.is(direct.status, 403);
  for (const client of [await httpClient(c, key), await stdioClient(c, key)]) {
    const r = await client.callTool({
      name: "exec_command",
      arguments: { server_id: c.serverId, command: "true" },
    });
    t.true(r.isError);
    t.is(textOf(r), `HTTP 403: ${String(direct.json.detail)}`);
    // The scope is checked before the arguments, as the API checks it before the body.
    const invalid = await client.callTool({ name: "exec_command", arguments: { command: "" } });
    t.true(invalid.isError);
    t.is(textOf(invalid), `HTTP 403: ${String(direct.json.detail)}`);
  }
  // A key cannot read the dashboard API at all: the API's 401, and why.
  const servers = await (await httpClient(c, c.key)).callTool({ name: "list_servers", arguments: {} });
  t.true(servers.isError);
  t.regex(
    textOf(servers),
    /^HTTP 401: missing X-API-Key header.*takes a person's login, not an automation key\)$/,
  );
});

test.serial("mcp - a revoked key is refused at its next call", async (t) => {
  const { keyId: id, key } = await c.createKey();
  const client = await httpClient(c, key);
  const ok = await client.callTool({ name: "list_operations", arguments: { run_id: "mcp-revoke" } });
  t.falsy(ok.isError, textOf(ok));
  await c.admin(["revoke-automation-key", "--key-id", id]);
  const err = await t.throwsAsync(
    client.callTool({ name: "list_operations", arguments: { run_id: "mcp-revoke" } }),
  );
  t.regex(String(err?.message), /automation key has been revoked/);

  const stdio = await stdioClient(c, key).catch((e: Error) => e);
  t.true(stdio instanceof Error, "stdio refuses the revoked key at initialize");
  t.regex(String((stdio as Error).message), /revoked/);
});

test.serial(
  "mcp - over stdio, a key revoked while relayctl mcp runs is refused at its next call",
  async (t) => {
    const { keyId: id, key } = await c.createKey();
    const client = await stdioClient(c, key);
    const ok = await client.callTool({ name: "list_operations", arguments: { run_id: "mcp-revoke-stdio" } });
    t.falsy(ok.isError, textOf(ok));
    await c.admin(["revoke-automation-key", "--key-id", id]);
    const err = await t.throwsAsync(
      client.callTool({ name: "list_operations", arguments: { run_id: "mcp-revoke-stdio" } }),
    );
    t.regex(String(err?.message), /automation key has been revoked/);
  },
);

test.serial(
  "mcp - discovery: a 401 points at the protected resource metadata, which names relayctl's authorization server",
  async (t) => {
    const res = await fetch(`${c.baseUrl}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    t.is(res.status, 401);
    const challenge = String(res.headers.get("www-authenticate"));
    const url = /resource_metadata="([^"]+)"/.exec(challenge)?.[1];
    t.is(url, `${c.baseUrl}/.well-known/oauth-protected-resource/mcp`);
    const prm = await discoverOAuthProtectedResourceMetadata(new URL(`${c.baseUrl}/mcp`));
    t.like(prm, {
      resource: `${c.baseUrl}/mcp`,
      authorization_servers: [c.baseUrl],
      bearer_methods_supported: ["header"],
    });
    t.deepEqual(await (await fetch(String(url))).json(), prm);
    // Stateless: no standalone GET stream to hold open, no session to delete.
    const get = await fetch(`${c.baseUrl}/mcp`, {
      headers: { authorization: `Bearer ${c.key}`, accept: "text/event-stream" },
    });
    t.is(get.status, 405);
    t.is(get.headers.get("allow"), "POST");
    const as = await (
      await fetch(`${prm.authorization_servers?.[0]}/.well-known/oauth-authorization-server`)
    ).json();
    t.like(as, {
      issuer: c.baseUrl,
      device_authorization_endpoint: `${c.baseUrl}/oauth/device/code`,
      token_endpoint: `${c.baseUrl}/oauth/token`,
    });
  },
);
