// The MCP server's tools that change a server, with the official SDK's client against a running
// control plane and agent: a deployment by a person's OAuth token over Streamable HTTP and by a
// key over stdio, each step followed as progress; a container restarted; and `relayctl mcp`
// without a token using the CLI's stored login. Tool lists, scopes and discovery: mcp.test.ts.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import test from "ava";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { CliUser, collect, waitForStderr } from "./harness/cli";
import type { Cluster } from "./harness/cluster";
import { BASE_IMAGE, podman, removeAppImages, startWebContainer } from "./harness/containers";
import { request } from "./harness/http";
import {
  ALL_TOOLS,
  auditPayload,
  httpClient,
  names,
  startMcpStack,
  stdioClient,
  textOf,
} from "./harness/mcp";
import type { Browser } from "./harness/people";

const run = promisify(execFile);
let c: Cluster;
let apiKey: string;
let personToken: string;
let browser: Browser;

test.before(async () => {
  ({ c, apiKey, personToken, browser } = await startMcpStack());
});
test.after.always(cleanupAll);

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
  const client = await httpClient(c, personToken);
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
  const [event] = await auditPayload(c, String(d.operation_id), "operation.deploy");
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
  const client = await stdioClient(c, c.key);
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
  const [event] = await auditPayload(c, String(op.operation_id), "operation.deploy");
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
  const client = await httpClient(c, c.key);
  const r = await client.callTool({
    name: "restart_container",
    arguments: { server_id: c.serverId, container_name: web.name, run_id: "mcp-restart" },
  });
  t.falsy(r.isError, textOf(r));
  const out = r.structuredContent as Record<string, unknown>;
  t.like(out, { status: "completed", exit_code: 0 });
  t.not(await startedAt(), before, "the container started again");
  const [event] = await auditPayload(c, String(out.operation_id), "operation.restart");
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
  const client = await stdioClient(c, null, u.configDir);
  t.deepEqual(names((await client.listTools()).tools), ALL_TOOLS);
  const r = await client.callTool({ name: "list_servers", arguments: {} });
  t.true((r.structuredContent as { servers: { id: string }[] }).servers.some((s) => s.id === c.serverId));
});
