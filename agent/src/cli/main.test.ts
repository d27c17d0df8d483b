// The relayctl-agent command line, run as a real process against a local HTTP
// server that follows the enrollment contract (process-interfaces.md).
import { execFile } from "node:child_process";
import { mkdtemp, readFile, stat } from "node:fs/promises";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test, { type ExecutionContext } from "ava";
import { listenOnFreePort } from "@relayctl/devkit";

const MAIN = join(__dirname, "main.ts");

function agentCli(args: string[], env: NodeJS.ProcessEnv = {}) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ["--import=tsx", MAIN, ...args],
      { env: { ...process.env, ...env } },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code) : 0, stdout, stderr }),
    );
  });
}

async function controlPlane(t: ExecutionContext, handle: (body: unknown, res: ServerResponse) => void) {
  const server = createServer((req: IncomingMessage, res) => {
    let text = "";
    req.on("data", (c) => {
      text += c;
    });
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/api/agent/enroll") {
        res.writeHead(404).end();
        return;
      }
      handle(JSON.parse(text), res);
    });
  });
  const port = await listenOnFreePort(server);
  t.teardown(() => server.close());
  return `http://127.0.0.1:${port}`;
}

const json = (res: ServerResponse, code: number, body: unknown) =>
  res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(body));

test("cli - enroll saves agent.json 0600 in a 0700 dir and prints the server", async (t) => {
  let request: unknown;
  const url = await controlPlane(t, (body, res) => {
    request = body;
    json(res, 201, {
      server_id: "6f1c",
      server_name: "web-1",
      agent_credential: "rag_secret",
      gateway_urls: ["grpc://127.0.0.1:8443"],
    });
  });
  const stateDir = join(await mkdtemp(join(tmpdir(), "relayctl-enroll-")), "state");
  const out = await agentCli(["enroll", "--url", `${url}/`, "--token", "rjt_abc", "--state-dir", stateDir]);
  t.is(out.code, 0, out.stderr);
  t.deepEqual(JSON.parse(out.stdout), { server_id: "6f1c", server_name: "web-1" });
  t.like(request, { join_token: "rjt_abc" });
  t.is((await stat(stateDir)).mode & 0o777, 0o700);
  const file = join(stateDir, "agent.json");
  t.is((await stat(file)).mode & 0o777, 0o600);
  t.deepEqual(JSON.parse(await readFile(file, "utf8")), {
    control_plane_url: url,
    server_id: "6f1c",
    server_name: "web-1",
    agent_credential: "rag_secret",
    gateway_urls: ["grpc://127.0.0.1:8443"],
  });
});

test("cli - enroll shows the server's detail when the token is refused", async (t) => {
  const url = await controlPlane(t, (_body, res) => json(res, 401, { detail: "join token expired" }));
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-enroll-"));
  const out = await agentCli(["enroll", "--url", url, "--token", "rjt_old", "--state-dir", stateDir]);
  t.is(out.code, 1);
  t.is(out.stderr, "relayctl-agent: enroll: enrollment refused (HTTP 401): join token expired\n");
});

test("cli - run without enrollment and with bad config say so in one line", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-run-"));
  const notEnrolled = await agentCli(["run", "--state-dir", stateDir]);
  t.is(notEnrolled.code, 1);
  t.regex(notEnrolled.stderr, /^relayctl-agent: .*agent\.json not found: enroll first/);
  const badConfig = await agentCli(["run", "--state-dir", stateDir], {
    RELAYCTL_AGENT_KILL_GRACE_MS: "soon",
  });
  t.is(badConfig.code, 2);
  t.is(badConfig.stderr, "relayctl-agent: config: RELAYCTL_AGENT_KILL_GRACE_MS: must be a whole number\n");
});
