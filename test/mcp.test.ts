// The MCP server with the official SDK's client, over both transports, against a
// running control plane and agent: Streamable HTTP at /mcp (an rca_ key, a
// person's OAuth token) and stdio through the built `relayctl mcp`. Tool lists
// follow the credential's scope, a command runs and its output comes back (env
// values scrubbed), an out-of-scope call is refused with the API's own detail, a
// revoked key is refused at its next call, the discovery documents lead to the
// device flow, and one deployment is followed through its progress notifications.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  Client,
  StreamableHTTPClientTransport,
  discoverOAuthProtectedResourceMetadata,
} from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import test from "ava";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { CLI_MAIN, CliUser, collect, waitForStderr } from "./harness/cli";
import { type Cluster, startCluster } from "./harness/cluster";
import {
  BASE_IMAGE,
  buildBaseImage,
  podman,
  podmanAgentEnv,
  removeAppImages,
  startWebContainer,
} from "./harness/containers";
import { request } from "./harness/http";
import { Browser, createOwner, deviceTokens } from "./harness/people";

const run = promisify(execFile);
let c: Cluster;
let apiKey: string;
let personToken: string;
let browser: Browser;

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
const ALL_TOOLS = [
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

test.before(async () => {
  await buildBaseImage();
  c = await startCluster({
    serverEnv: { RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: "1" },
    agentEnv: { ...podmanAgentEnv, RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: "1" },
  });
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "mcp-admin"])).key);
  const owner = await createOwner(c.db.url, c.tenantId);
  browser = new Browser(c.baseUrl);
  await browser.signIn(owner);
  personToken = (await deviceTokens(c.baseUrl, browser)).access_token;
});
test.after.always(cleanupAll);

async function connect(client: Client, transport: StreamableHTTPClientTransport | StdioClientTransport) {
  await client.connect(transport);
  onCleanup(() => client.close());
  return client;
}

const httpClient = (token: string) =>
  connect(
    new Client({ name: "relayctl-test", version: "1.0.0" }),
    new StreamableHTTPClientTransport(new URL(`${c.baseUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );

const stdioClient = (token: string | null, configDir = makeTempDir("mcp-cli")) =>
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
async function scopedKey(operations: string[]): Promise<{ id: string; key: string }> {
  const res = await request(c, "/api/automation-keys", {
    key: null,
    headers: { "x-api-key": apiKey },
    body: { name: `mcp-${randomBytes(3).toString("hex")}`, operations },
  });
  if (res.status !== 201) throw new Error(`create key: ${res.status} ${res.text}`);
  return { id: String(res.json.id), key: String(res.json.key) };
}

const names = (tools: { name: string }[]) => tools.map((t) => t.name).sort();
const textOf = (r: { content?: unknown }) =>
  ((r.content ?? []) as { type: string; text?: string }[]).map((p) => p.text ?? "").join("\n");

async function auditPayload(operationId: string, eventType: string) {
  const rows = await c.db.query(
    "SELECT payload FROM audit_events WHERE operation_id = ? AND event_type = ?",
    [operationId, eventType],
  );
  return rows.map((r) => JSON.parse(String(r.payload)) as Record<string, unknown>);
}

test.serial("mcp - tools follow the credential: a read-only key lists only read tools", async (t) => {
  const full = await httpClient(c.key);
  const listed = (await full.listTools()).tools;
  t.deepEqual(names(listed), KEY_TOOLS);
  const exec = listed.find((x) => x.name === "exec_command")!;
  t.like(exec.annotations, { readOnlyHint: false, destructiveHint: true, idempotentHint: false });
  t.deepEqual([...(exec.inputSchema.required ?? [])].sort(), ["command", "server_id"]);
  t.like(exec.inputSchema.properties?.command, { maxLength: 8192 });
  t.truthy(exec.outputSchema);

  const person = await httpClient(personToken);
  t.deepEqual(names((await person.listTools()).tools), ALL_TOOLS);

  // A CI key that may only sync external deploys: none of the acting tools.
  const readOnly = await httpClient((await scopedKey(["external_deploy"])).key);
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
    const tools = (await (await httpClient(personToken)).listTools()).tools;
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
    const client = await httpClient(c.key);
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
    const client = await stdioClient(c.key);
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

    const [event] = await auditPayload(String(out.operation_id), "operation.exec");
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
    const client = await httpClient(c.key);
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
  const { key } = await scopedKey(["external_deploy"]);
  const direct = await request(c, "/api/automation/v1/exec", {
    key,
    body: { server_id: c.serverId, command: "true" },
  });
  t.is(direct.status, 403);
  for (const client of [await httpClient(key), await stdioClient(key)]) {
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
  const servers = await (await httpClient(c.key)).callTool({ name: "list_servers", arguments: {} });
  t.true(servers.isError);
  t.regex(
    textOf(servers),
    /^HTTP 401: missing X-API-Key header.*takes a person's login, not an automation key\)$/,
  );
});

test.serial("mcp - a revoked key is refused at its next call", async (t) => {
  const { keyId: id, key } = await c.createKey();
  const client = await httpClient(key);
  const ok = await client.callTool({ name: "list_operations", arguments: { run_id: "mcp-revoke" } });
  t.falsy(ok.isError, textOf(ok));
  await c.admin(["revoke-automation-key", "--key-id", id]);
  const err = await t.throwsAsync(
    client.callTool({ name: "list_operations", arguments: { run_id: "mcp-revoke" } }),
  );
  t.regex(String(err?.message), /automation key has been revoked/);

  const stdio = await stdioClient(key).catch((e: Error) => e);
  t.true(stdio instanceof Error, "stdio refuses the revoked key at initialize");
  t.regex(String((stdio as Error).message), /revoked/);
});

test.serial(
  "mcp - over stdio, a key revoked while relayctl mcp runs is refused at its next call",
  async (t) => {
    const { keyId: id, key } = await c.createKey();
    const client = await stdioClient(key);
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

async function git(cwd: string, ...args: string[]) {
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: "Dev",
    GIT_AUTHOR_EMAIL: "dev@example.test",
    GIT_COMMITTER_NAME: "Dev",
    GIT_COMMITTER_EMAIL: "dev@example.test",
  };
  return (await run("git", args, { cwd, env })).stdout.trim();
}

/** A new application on the test server, from a fresh repository serving `hello from an mcp deploy`. */
async function createApp(): Promise<{ appId: string; name: string }> {
  const repo = makeTempDir("mcp-repo");
  await git(repo, "init", "-q", "-b", "main");
  mkdirSync(join(repo, "www"));
  writeFileSync(join(repo, "www", "index.html"), "hello from an mcp deploy");
  writeFileSync(
    join(repo, "Dockerfile"),
    `FROM ${BASE_IMAGE}\nCOPY www /www\nCMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n`,
  );
  await git(repo, "add", "-A");
  await git(repo, "commit", "-q", "-m", "first release");
  const name = `mcp-shop-${randomBytes(3).toString("hex")}`;
  const created = await request(c, "/api/applications", {
    key: null,
    headers: { "x-api-key": apiKey },
    body: {
      name,
      server_id: c.serverId,
      linked_container_name: name,
      container_port: 8080,
      fqdns: [],
      git_repository: repo,
      deploy_branch: "main",
    },
  });
  if (created.status !== 201) throw new Error(`create application: ${created.status} ${created.text}`);
  const appId = String(created.json.id);
  onCleanup(async () => {
    const { stdout } = await podman(["ps", "-aq", "--filter", `label=relayctl.application=${appId}`]).catch(
      () => ({ stdout: "" }),
    );
    for (const cid of stdout.split("\n").filter(Boolean)) await podman(["rm", "-f", cid]).catch(() => {});
    await removeAppImages(appId);
  });
  return { appId, name };
}

test.serial("mcp - a person's OAuth token reads and deploys, following each step as progress", async (t) => {
  const { appId, name } = await createApp();
  const client = await httpClient(personToken);
  const servers = await client.callTool({ name: "list_servers", arguments: {} });
  t.true(
    (servers.structuredContent as { servers: { id: string }[] }).servers.some((s) => s.id === c.serverId),
  );
  const app = await client.callTool({ name: "get_application", arguments: { application_id: appId } });
  t.like(app.structuredContent, { id: appId, name });

  const progress: string[] = [];
  const r = await client.callTool(
    { name: "deploy_application", arguments: { application_id: appId, timeout_seconds: 300 } },
    { onprogress: (p) => progress.push(String(p.message)), timeout: 320_000, resetTimeoutOnProgress: true },
  );
  t.falsy(r.isError, textOf(r));
  const d = r.structuredContent as Record<string, unknown>;
  t.like(d, { status: "completed", application_id: appId, trigger: "cli" });
  for (const step of ["fetch", "build", "start", "health_check", "switch"])
    t.true(
      progress.some((m) => m.startsWith(`${step}: `)),
      `${step} in ${progress.join(" | ")}`,
    );
  const page = await fetch(`http://127.0.0.1:${d.host_port}/`);
  t.is(await page.text(), "hello from an mcp deploy");

  const got = await client.callTool({
    name: "get_deployment",
    arguments: { application_id: appId, deployment_id: d.deployment_id },
  });
  const steps = (got.structuredContent as { steps: { name: string; status: string }[] }).steps;
  t.like(
    steps.find((s) => s.name === "switch"),
    { status: "succeeded" },
  );
  const [event] = await auditPayload(String(d.operation_id), "operation.deploy");
  t.like(event, { via: { client: "mcp", tool: "deploy_application" } });

  const logs = await client.callTool({
    name: "application_logs",
    arguments: { application_id: appId, tail: 5 },
  });
  t.falsy(logs.isError, textOf(logs));
  t.like(logs.structuredContent, { container: d.container_name, end: "complete" });

  const audit = await client.callTool({
    name: "list_audit_events",
    arguments: { operation_id: d.operation_id },
  });
  t.true((audit.structuredContent as { events: unknown[] }).events.length > 0);
});

test.serial("mcp - a key deploys over stdio, each step of its deployment reported as progress", async (t) => {
  const { appId } = await createApp();
  const client = await stdioClient(c.key);
  // The progress notifications as they come off the wire: the SDK client hands each to its handler
  // a microtask late and drops those that arrive in the same read as the answer.
  const wire: string[] = [];
  const transport = client.transport!;
  const deliver = transport.onmessage!;
  let answered = false; // what comes after the answer is not counted
  transport.onmessage = (m, extra) => {
    if ("result" in m || "error" in m) answered = true;
    if (!answered && "method" in m && m.method === "notifications/progress")
      wire.push(String(m.params?.message));
    deliver(m, extra);
  };
  const progress: { progress: number; message?: string }[] = [];
  const r = await client.callTool(
    { name: "deploy_application", arguments: { application_id: appId, timeout_seconds: 300 } },
    { onprogress: (p) => progress.push(p), timeout: 320_000, resetTimeoutOnProgress: true },
  );
  t.falsy(r.isError, textOf(r));
  const op = r.structuredContent as Record<string, unknown>;
  t.like(op, { operation_type: "deploy", status: "completed" });
  const messages = progress.map((p) => String(p.message));
  // A key cannot read the dashboard API, yet it hears each step of the deployment it started,
  // before the answer; what the SDK handed on is the same, in order, but for the last ones.
  for (const step of ["fetch", "build", "start", "health_check", "switch"])
    t.true(
      wire.some((m) => m.startsWith(`${step}: `)),
      `${step} in ${wire.join(" | ")}`,
    );
  t.deepEqual(messages, wire.slice(0, messages.length));
  t.deepEqual(
    progress.map((p) => p.progress),
    progress.map((_, i) => i + 1),
    "progress counts up",
  );
  const [event] = await auditPayload(String(op.operation_id), "operation.deploy");
  t.like(event, { via: { client: "mcp", tool: "deploy_application" }, key_id: c.keyId });
  // An automation key reads the logs of an application on a server in its scope.
  const logs = await client.callTool({ name: "application_logs", arguments: { application_id: appId } });
  t.falsy(logs.isError, textOf(logs));
  t.like(logs.structuredContent, { end: "complete" });
});

test.serial("mcp - restart_container restarts the container and is audited as MCP's", async (t) => {
  const web = await startWebContainer("mcp-restart", ["a"]);
  const startedAt = async () =>
    (await podman(["inspect", "--format", "{{.State.StartedAt}}", web.name])).stdout.trim();
  const before = await startedAt();
  const client = await httpClient(c.key);
  const r = await client.callTool({
    name: "restart_container",
    arguments: { server_id: c.serverId, container_name: web.name, run_id: "mcp-restart" },
  });
  t.falsy(r.isError, textOf(r));
  const out = r.structuredContent as Record<string, unknown>;
  t.like(out, { status: "completed", exit_code: 0 });
  t.not(await startedAt(), before, "the container started again");
  const [event] = await auditPayload(String(out.operation_id), "operation.restart");
  t.like(event, {
    via: { client: "mcp", tool: "restart_container" },
    key_id: c.keyId,
    container_name: web.name,
  });
});

test.serial("mcp - relayctl mcp without a token uses the CLI's stored login, a person's tools", async (t) => {
  const u = new CliUser();
  const child = u.spawn(["login", "--url", c.baseUrl]);
  const done = collect(child);
  const [, uri] = await waitForStderr(child, /\(or open (\S+)\)/);
  await browser.answerDevice(uri, "approve");
  t.is((await done).code, 0);
  const client = await stdioClient(null, u.configDir);
  t.deepEqual(names((await client.listTools()).tools), ALL_TOOLS);
  const r = await client.callTool({ name: "list_servers", arguments: {} });
  t.true((r.structuredContent as { servers: { id: string }[] }).servers.some((s) => s.id === c.serverId));
});
