// The CLI ready after `make dev`, on a control plane set up the way `make dev` sets it up (role
// all, in-process bus, SQLite, API on loopback, no RELAYCTL_PUBLIC_URL, no OAuth client
// registered, one local agent): bin/relayctl runs the checkout's CLI on Node 24 (and `npm exec
// relayctl`), the single-file bundle built by scripts/cli-bundle.mjs is installed on "another
// machine" (a temp HOME) with the served one-liner and runs there, and `relayctl login` works
// against the dev URL as it is.
import { type SpawnOptions, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import test from "ava";
import { run } from "@relayctl/devkit";
import { Agent, enroll } from "./harness/agent";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { type CliResult, collect, waitForStderr } from "./harness/cli";
import { type ControlPlane, admin, startControlPlane } from "./harness/control-plane";
import { request } from "./harness/http";
import { Browser, type Person, createOwner } from "./harness/people";
import { REPO_ROOT } from "./harness/programs";

const BIN = join(REPO_ROOT, "bin", "relayctl");
const VERSION = JSON.parse(readFileSync(join(REPO_ROOT, "cli", "package.json"), "utf8")).version as string;
/** The Node 24 running these tests, first on every PATH below. */
const NODE_DIR = dirname(process.execPath);
const SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin";

let cp: ControlPlane;
let bundles: string;
let apiKey: string;
let automationKey: string;
let serverId: string;
let owner: Person;

test.before(async () => {
  const dir = makeTempDir("cli-install");
  // The bundle as `make build` and `make dev` make it, into a folder of the test's own.
  bundles = join(dir, "bundles");
  await run(process.execPath, [join(REPO_ROOT, "scripts", "cli-bundle.mjs"), "--out", bundles], {
    timeoutMs: 120_000,
  });
  const databaseUrl = `sqlite://${join(dir, "dev.db")}`;
  // What scripts/dev.mjs makes on its first run, before it starts serving (as it does): tenant
  // "dev", its keys and a join token for server "local". The first owner: in `make dev` from the
  // banner's one-time link; here made as the other tests make one.
  const adminStep = (args: string[]) => admin(databaseUrl, args);
  const tenantId = String((await adminStep(["create-tenant", "--name", "dev"])).tenant_id);
  automationKey = String(
    (await adminStep(["create-automation-key", "--tenant", tenantId, "--name", "dev"])).key,
  );
  apiKey = String((await adminStep(["create-api-key", "--tenant", tenantId, "--name", "dev"])).key);
  const token = await adminStep(["create-join-token", "--tenant", "dev", "--server-name", "local"]);
  owner = await createOwner(databaseUrl, tenantId);
  cp = await startControlPlane({
    role: "all",
    bus: "memory",
    databaseUrl,
    dir,
    env: { RELAYCTL_CLI_BUNDLE_DIR: bundles },
  });
  onCleanup(() => cp.stop());
  const stateDir = join(dir, "agent");
  serverId = String((await enroll(cp.apiUrl, String(token.join_token), stateDir)).server_id);
  const agent = await new Agent(stateDir, dir).start();
  onCleanup(() => agent.stop());
});
test.after.always(cleanupAll);

/** The environment of a person's shell: no RELAYCTL_* of the test's own, their HOME and PATH. */
function shellEnv(home: string, path: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("RELAYCTL_")) env[k] = v;
  return {
    ...env,
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    PATH: path,
    RELAYCTL_NO_BROWSER: "1",
    ...extra,
  };
}

function runIn(command: string, args: string[], opts: SpawnOptions & { input?: string }): Promise<CliResult> {
  const child = spawn(command, args, { ...opts, stdio: ["pipe", "pipe", "pipe"] });
  onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  return collect(child, { input: opts.input, timeoutMs: 60_000 });
}

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

/** A folder of symlinks to exactly these programs: a PATH that holds nothing else. */
function pathOf(programs: Record<string, string>): string {
  const bin = makeTempDir("path");
  for (const [name, target] of Object.entries(programs)) symlinkSync(target, join(bin, name));
  return bin;
}

/** The tools `<relayctl> mcp` offers over stdio with the automation key: a session relayed to /mcp. */
async function mcpTools(relayctl: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  const mcp = new Client({ name: "relayctl-test", version: "1.0.0" });
  await mcp.connect(
    new StdioClientTransport({
      command: relayctl === BIN ? BIN : process.execPath,
      args: relayctl === BIN ? ["mcp"] : [relayctl, "mcp"],
      env: {
        PATH: String(env.PATH),
        HOME: String(env.HOME),
        RELAYCTL_URL: cp.apiUrl,
        RELAYCTL_TOKEN: automationKey,
      },
      stderr: "pipe",
    }),
  );
  try {
    return (await mcp.listTools()).tools.map((x) => x.name);
  } finally {
    await mcp.close();
  }
}

const which = async (name: string) =>
  (await run("/bin/sh", ["-c", `command -v ${name}`], { env: { PATH: SYSTEM_PATH } })).stdout.trim();

test.serial(
  "cli - output piped into a reader that stops early (| head) ends quietly, no EPIPE trace",
  async (t) => {
    const env = shellEnv(makeTempDir("home"), `${NODE_DIR}:${SYSTEM_PATH}`);
    // `true` exits without reading, long before node has started: every write of the help meets
    // a closed pipe. pipefail makes the pipeline's status the CLI's own.
    const piped = await runIn("bash", ["-c", 'set -o pipefail; "$0" deploy --help | true', BIN], { env });
    t.is(piped.code, 0, piped.stderr);
    t.notRegex(piped.stderr, /EPIPE|Unhandled 'error' event/);
  },
);

test.serial(
  "cli - bin/relayctl runs the checkout's CLI on Node 24, also through a link and npm exec",
  async (t) => {
    const home = makeTempDir("home");
    const env = shellEnv(home, `${NODE_DIR}:${SYSTEM_PATH}`);
    const version = await runIn(BIN, ["--version"], { env });
    t.is(version.code, 0, version.stderr);
    t.is(version.stdout, `${VERSION}\n`);

    // A real command against the control plane, with the dev API key.
    const servers = await runIn(BIN, ["servers", "list", "--json", "--url", cp.apiUrl], {
      env: { ...env, RELAYCTL_TOKEN: apiKey },
    });
    t.is(servers.code, 0, servers.stderr);
    const listed = JSON.parse(servers.stdout) as { servers: { id: string; name: string }[] };
    t.like(
      listed.servers.find((s) => s.name === "local"),
      { id: serverId },
    );
    // An exec through the agent, by server id with the automation key.
    const hello = await runIn(BIN, ["exec", serverId, "--url", cp.apiUrl, "--", "echo", "relayctl-bin-ok"], {
      env: { ...env, RELAYCTL_TOKEN: automationKey },
    });
    t.is(hello.code, 0, hello.stderr);
    t.is(hello.stdout, "relayctl-bin-ok\n");

    // `relayctl mcp`: its MCP SDK ("type": "module" packages) loads from the checkout's CommonJS.

    t.true((await mcpTools(BIN, env)).includes("exec_command"));

    // Linked into a folder on PATH, the wrapper still finds the checkout.
    const linked = makeTempDir("linked");
    symlinkSync(BIN, join(linked, "relayctl"));
    const viaLink = await runIn("relayctl", ["--version"], { env: shellEnv(home, `${linked}:${env.PATH}`) });
    t.is(viaLink.stdout, `${VERSION}\n`, viaLink.stderr);

    // The cli package's "bin", as npm links it at npm ci.
    const viaNpm = await runIn("npm", ["exec", "--offline", "relayctl", "--", "--version"], {
      env,
      cwd: REPO_ROOT,
    });
    t.is(viaNpm.code, 0, viaNpm.stderr);
    t.is(viaNpm.stdout.trim(), VERSION);
  },
);

test.serial(
  "cli - bin/relayctl takes the Node in .tools/ over an older one on PATH, and says what to do without one",
  async (t) => {
    // A checkout of its own: bin/ copied, cli/ linked, and .tools/ as node-runtime.sh leaves it.
    const checkout = makeTempDir("checkout");
    mkdirSync(join(checkout, "bin"));
    cpSync(BIN, join(checkout, "bin", "relayctl"));
    symlinkSync(join(REPO_ROOT, "cli"), join(checkout, "cli"));
    const tools = { dirname: await which("dirname"), readlink: await which("readlink") };
    const home = makeTempDir("home");
    const copy = join(checkout, "bin", "relayctl");

    // No node anywhere: one line saying what to run.
    const none = await runIn(copy, ["--version"], { env: shellEnv(home, pathOf(tools)) });
    t.is(none.code, 69);
    t.is(
      none.stderr,
      `relayctl: needs Node.js >= 24 (found none on PATH): run \`make dev\` in ${checkout} once (it fetches Node 24 into .tools/), or install Node.js 24\n`,
    );
    t.is(none.stdout, "");

    // An older node on PATH (this machine's own, when it has one) is passed over for .tools/'s.
    const systemNode = await which("node").catch(() => "");
    const old = systemNode ? (await run(systemNode, ["-p", "process.versions.node"])).stdout.trim() : "";
    const pathWithOld = pathOf({
      ...tools,
      ...(old && Number(old.split(".")[0]) < 24 ? { node: systemNode } : {}),
    });
    const nodeDir = join(checkout, ".tools", "node-v24.0.0-linux-x64", "bin");
    mkdirSync(nodeDir, { recursive: true });
    symlinkSync(process.execPath, join(nodeDir, "node"));
    const fromTools = await runIn(copy, ["--version"], { env: shellEnv(home, pathWithOld) });
    t.is(fromTools.code, 0, fromTools.stderr);
    t.is(fromTools.stdout, `${VERSION}\n`);
  },
);

test.serial(
  "cli install - the one-liner installs the served bundle into HOME; its sha256 matches and it runs",
  async (t) => {
    const latest = await request({ baseUrl: cp.apiUrl }, "/cli/latest", { key: null });
    t.is(latest.status, 200, latest.text);
    const built = JSON.parse(readFileSync(join(bundles, "latest.json"), "utf8"));
    t.deepEqual(latest.json, { ...built, url: `${cp.apiUrl}/cli/${VERSION}/relayctl-${VERSION}.cjs` });
    t.is(built.sha256, sha256(join(bundles, built.file)));

    const home = makeTempDir("home");
    const env = shellEnv(home, `${NODE_DIR}:${SYSTEM_PATH}`);
    // As root the installer's default is /usr/local/bin, this machine's own: name HOME's instead.
    const asRoot = process.getuid?.() === 0 ? ` -s -- --dir ${home}/.local/bin` : "";
    const install = await runIn("/bin/sh", ["-c", `curl -fsSL ${cp.apiUrl}/cli/install.sh | sh${asRoot}`], {
      env,
    });
    t.is(install.code, 0, install.stderr);
    const installed = join(home, ".local", "bin", "relayctl");
    t.true(
      install.stdout.includes(`installed relayctl ${VERSION} as ${installed} (sha256 ${built.sha256})`),
      install.stdout,
    );
    t.true(install.stdout.includes("is not on your PATH"), "says how to reach it");
    t.true(install.stdout.includes(`next: relayctl login --url ${cp.apiUrl}`));
    t.is(sha256(installed), built.sha256, "the installed file is the served bundle");
    t.is(statSync(installed).mode & 0o777, 0o755);

    const version = await runIn(process.execPath, [installed, "--version"], { env });
    t.is(version.stdout, `${VERSION}\n`, version.stderr);
    // Run by its own name, with ~/.local/bin on PATH, against the control plane, no checkout needed.
    const onPath = shellEnv(home, `${dirname(installed)}:${env.PATH}`, { RELAYCTL_TOKEN: automationKey });
    const hello = await runIn(
      "relayctl",
      ["exec", serverId, "--url", cp.apiUrl, "--", "echo", "relayctl-bundle-ok"],
      {
        env: onPath,
        cwd: home,
      },
    );
    t.is(hello.code, 0, hello.stderr);
    t.is(hello.stdout, "relayctl-bundle-ok\n");

    // `relayctl mcp` from the bundle: the MCP SDK (ES modules) bundled into CommonJS still relays
    // an MCP session to the control plane's /mcp with the CLI's credential.
    t.true((await mcpTools(installed, env)).includes("exec_command"));

    // Run again, it upgrades in place (the same file here) and says so.
    const again = await runIn(
      "/bin/sh",
      ["-c", `curl -fsSL ${cp.apiUrl}/cli/install.sh | sh -s -- --dir ${home}/bin`],
      {
        env,
      },
    );
    t.is(again.code, 0, again.stderr);
    t.is(sha256(join(home, "bin", "relayctl")), built.sha256);
  },
);

test.serial(
  "cli install - a download whose sha256 does not match is refused and nothing is installed",
  async (t) => {
    const file = join(bundles, `relayctl-${VERSION}.cjs`);
    const original = readFileSync(file);
    // The served file changed after its checksum was written (a corrupt or tampered copy).
    writeFileSync(file, Buffer.concat([original, Buffer.from("\nprocess.exit(0)\n")]));
    onCleanup(() => writeFileSync(file, original));
    const home = makeTempDir("home");
    const r = await runIn(
      "/bin/sh",
      ["-c", `curl -fsSL ${cp.apiUrl}/cli/install.sh | sh -s -- --dir ${home}/bin`],
      {
        env: shellEnv(home, `${NODE_DIR}:${SYSTEM_PATH}`),
      },
    );
    writeFileSync(file, original);
    t.is(r.code, 1);
    t.regex(
      r.stderr,
      /^install\.sh: checksum mismatch for relayctl-.*\.cjs: expected sha256 [0-9a-f]{64} from the control plane, the download has [0-9a-f]{64}\. The file is corrupt or was tampered with; nothing was installed\n$/,
    );
    t.false(existsSync(join(home, ".local", "bin", "relayctl")));
  },
);

test.serial(
  "cli install - without Node 24 on PATH the installer stops before downloading, saying so",
  async (t) => {
    const res = await request({ baseUrl: cp.apiUrl }, "/cli/install.sh", { key: null });
    t.is(res.status, 200);
    const home = makeTempDir("home");
    // Only what the script runs before its Node check: no node, no curl (nothing is downloaded).
    const bare = pathOf({ id: await which("id") });
    const none = await runIn("/bin/sh", ["-s"], { env: shellEnv(home, bare), input: res.text });
    t.is(none.code, 1);
    t.is(
      none.stderr,
      "install.sh: relayctl needs Node.js 24 or newer, and there is no node on PATH: install Node.js 24 (https://nodejs.org/en/download, or your package manager), then run this again\n",
    );
    t.false(existsSync(join(home, ".local")));
  },
);

test.serial(
  "cli - relayctl login against the dev control plane as make dev starts it: device flow, then a command",
  async (t) => {
    const browser = new Browser(cp.apiUrl);
    await browser.signIn(owner);
    const home = makeTempDir("home");
    const env = shellEnv(home, `${NODE_DIR}:${SYSTEM_PATH}`);
    // What the dev banner tells a person to run.
    const child = spawn(BIN, ["login", "--url", cp.apiUrl], { env, stdio: ["pipe", "pipe", "pipe"] });
    onCleanup(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
    const done = collect(child, { timeoutMs: 60_000 });
    const [, uri] = await waitForStderr(child, /\(or open (\S+)\)/);
    t.true(uri.startsWith(`${cp.apiUrl}/device?user_code=`), "the verification address is the dev URL");
    await browser.answerDevice(uri, "approve");
    const login = await done;
    t.is(login.code, 0, login.stderr);
    t.is(login.stdout, `Logged in to ${cp.apiUrl} as ${owner.email} (owner, tenant dev).\n`);
    t.true(existsSync(join(home, ".config", "relayctl", "credentials.json")));

    // The saved login is used by the next commands, with no --url: by server name, through the agent.
    const hello = await runIn(BIN, ["exec", "local", "--", "echo", "relayctl-login-ok"], { env });
    t.is(hello.code, 0, hello.stderr);
    t.is(hello.stdout, "relayctl-login-ok\n");
  },
);
