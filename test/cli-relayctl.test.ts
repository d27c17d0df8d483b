// The built relayctl CLI run as a process against a running control plane and
// agent: login through the device flow (the approval done on /login and /device
// over HTTP, as a browser would), whoami, exec passthrough, --json, exit codes for
// usage, auth and server errors, refresh after the access token expires, a revoked
// login, and the key/registry/app commands.
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import test from "ava";
import { run } from "@relayctl/devkit";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { CliUser, collect, waitForStderr } from "./harness/cli";
import { type Cluster, startCluster } from "./harness/cluster";
import { request } from "./harness/http";
import { Browser, type Person, createOwner, postForm } from "./harness/people";
import { pollUntil } from "./harness/wait";

/** Access tokens live 3 s here, so a test can outlive one. */
const ACCESS_TTL_S = 3;
let c: Cluster;
let owner: Person;
let browser: Browser;

test.before(async () => {
  c = await startCluster({
    serverEnv: {
      RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: "1",
      RELAYCTL_OAUTH_ACCESS_TOKEN_TTL_SECONDS: String(ACCESS_TTL_S),
    },
  });
  owner = await createOwner(c.db.url, c.tenantId);
  browser = new Browser(c.baseUrl);
  await browser.signIn(owner);
});
test.after.always(cleanupAll);

interface Stored {
  url: string;
  access_token: string;
  refresh_token: string;
  expires_at: number;
}
const stored = (u: CliUser): Stored =>
  JSON.parse(readFileSync(join(u.configDir, "credentials.json"), "utf8"));

/** `relayctl login` with the approval done in the browser when the code appears. */
async function login(u: CliUser) {
  const child = u.spawn(["login", "--url", c.baseUrl]);
  const done = collect(child);
  const [, uri] = await waitForStderr(child, /\(or open (\S+)\)/);
  await browser.answerDevice(uri, "approve");
  return done;
}

test.serial(
  "cli - login runs the device flow; the login is saved 0600; whoami shows the person",
  async (t) => {
    const u = new CliUser();
    const r = await login(u);
    t.is(r.code, 0, r.stderr);
    t.regex(r.stderr, /enter the code [BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}/);
    t.regex(r.stdout, new RegExp(`Logged in to .* as ${owner.email.replace(/\./g, "\\.")} \\(owner`));
    t.is(statSync(join(u.configDir, "credentials.json")).mode & 0o777, 0o600);
    t.regex(stored(u).access_token, /^rco_/);
    const who = await u.run(["whoami"]);
    t.is(who.code, 0, who.stderr);
    t.regex(who.stdout, /^user\s+owner-.*@example\.test$/m);
    t.regex(who.stdout, /^role\s+owner$/m);
    const json = await u.run(["whoami", "--json"]);
    t.is(json.code, 0);
    t.like(JSON.parse(json.stdout), {
      type: "user",
      tenant_id: c.tenantId,
      user: { id: owner.id, email: owner.email },
    });
  },
);

test.serial(
  "cli - login opens the browser at the verification address when there is a display",
  async (t) => {
    // The desktop's opener (xdg-open) stands in as a script that records what it was asked to open.
    const bin = makeTempDir("xdg-open");
    const opened = join(bin, "opened");
    writeFileSync(join(bin, "xdg-open"), `#!/bin/sh\nprintf '%s\\n' "$1" >> '${opened}'\n`, { mode: 0o755 });
    const desktop = { DISPLAY: ":99", RELAYCTL_NO_BROWSER: "", PATH: `${bin}:${process.env.PATH}` };
    const u = new CliUser(desktop);
    const child = u.spawn(["login", "--url", c.baseUrl]);
    const done = collect(child);
    const [, uri] = await waitForStderr(child, /\(or open (\S+)\)\nA browser window was opened\.\n/);
    const seen = await pollUntil(
      async () => (existsSync(opened) ? readFileSync(opened, "utf8") : undefined),
      {
        what: "xdg-open to be run",
        timeoutMs: 10_000,
        intervalMs: 100,
      },
    );
    t.is(seen, `${uri}\n`);
    await browser.answerDevice(uri, "approve");
    t.is((await done).code, 0);
    // --no-browser: the address is printed, nothing is opened.
    const v = new CliUser(desktop);
    const quiet = v.spawn(["login", "--url", c.baseUrl, "--no-browser", "--json"]);
    const quietDone = collect(quiet);
    const [, uri2] = await waitForStderr(quiet, /\(or open (\S+)\)/);
    await browser.answerDevice(uri2, "approve");
    const r = await quietDone;
    t.is(r.code, 0, r.stderr);
    t.false(r.stderr.includes("A browser window was opened"));
    // With --json the prompts stay on stderr and stdout is the one JSON answer: who is logged in.
    t.like(JSON.parse(r.stdout), { type: "user", user: { email: owner.email } });
    t.is(readFileSync(opened, "utf8"), `${uri}\n`);
  },
);

/**
 * A pass-through HTTP proxy in front of the api that records each request to
 * /oauth/token (arrival time, answer) and sends the first device-code poll twice,
 * as a network that duplicates a request would: the copy is answered
 * authorization_pending, the original — now too soon after it — slow_down.
 */
async function duplicatingProxy() {
  const polls: { at: number; error: string }[] = [];
  let duplicated = false;
  const forward = async (path: string, method: string, headers: Headers, body: Buffer | undefined) =>
    fetch(`${c.baseUrl}${path}`, { method, headers, body, redirect: "manual" });
  const server = createServer(async (req, res) => {
    const at = Date.now();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers))
      if (typeof v === "string" && !["host", "connection", "content-length"].includes(k)) headers.set(k, v);
    const isPoll = req.url === "/oauth/token" && String(body).includes("device_code");
    if (isPoll && !duplicated) {
      duplicated = true;
      await (await forward(req.url!, req.method!, headers, body)).arrayBuffer();
    }
    const answer = await forward(req.url!, req.method!, headers, body);
    const text = Buffer.from(await answer.arrayBuffer());
    if (isPoll) polls.push({ at, error: answer.ok ? "" : String(JSON.parse(String(text)).error) });
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "text/plain" });
    res.end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onCleanup(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, polls };
}

test.serial("cli - login honours slow_down: its polls are 5 s further apart from then on", async (t) => {
  const proxy = await duplicatingProxy();
  const u = new CliUser();
  const child = u.spawn(["login", "--url", proxy.url]);
  const done = collect(child, { timeoutMs: 60_000 });
  const [, uri] = await waitForStderr(child, /\(or open (\S+)\)/);
  await pollUntil(async () => (proxy.polls.length >= 1 ? true : undefined), {
    what: "the CLI's first poll",
    timeoutMs: 15_000,
    intervalMs: 100,
  });
  t.is(proxy.polls[0].error, "slow_down");
  await browser.answerDevice(uri, "approve");
  const r = await done;
  t.is(r.code, 0, r.stderr);
  // interval 1 s + 5 s: every poll after the slow_down came at least 6 s after the one before.
  t.true(proxy.polls.length >= 2, JSON.stringify(proxy.polls));
  for (let i = 1; i < proxy.polls.length; i++) {
    const gap = proxy.polls[i].at - proxy.polls[i - 1].at;
    t.true(gap >= 6000, `poll ${i} came ${gap} ms after the one before`);
    t.not(proxy.polls[i].error, "slow_down");
  }
  t.is(proxy.polls.at(-1)!.error, "");
});

test.serial("cli - a denied login exits with the auth code", async (t) => {
  const u = new CliUser();
  const child = u.spawn(["login", "--url", c.baseUrl]);
  const done = collect(child);
  const [, uri] = await waitForStderr(child, /\(or open (\S+)\)/);
  await browser.answerDevice(uri, "deny");
  const r = await done;
  t.is(r.code, 77);
  t.is(r.stderr.trim().split("\n").at(-1), "relayctl: the sign-in request was denied");
});

test.serial(
  "cli - exec passes stdout, stderr and the exit code through; --json prints the answer",
  async (t) => {
    const u = new CliUser();
    t.is((await login(u)).code, 0);
    const r = await u.run(["exec", c.serverName, "--", "echo to-out; echo to-err >&2; exit 7"]);
    t.is(r.code, 7, r.stderr);
    t.is(r.stdout, "to-out\n");
    t.is(r.stderr, "to-err\n");
    const j = await u.run(["exec", "--json", c.serverName, "--", "printf hi"]);
    t.is(j.code, 0, j.stderr);
    const answer = JSON.parse(j.stdout);
    t.like(answer, { status: "completed", exit_code: 0, stdout: "hi", stderr: "" });
    t.regex(answer.operation_id, /^[0-9a-f-]{36}$/);
    // The operation is the person's, in the audit trail.
    const [row] = await c.db.query("SELECT key_id FROM operations WHERE id = ?", [answer.operation_id]);
    t.is(row.key_id, owner.id);
    // --env passes a value from this shell without putting it on the command line.
    const e = await u.run(
      [
        "exec",
        c.serverName,
        "--env",
        "GREETING",
        "--",
        'test "$GREETING" = hello-from-env && echo "len=${#GREETING}"',
      ],
      { env: { GREETING: "hello-from-env" } },
    );
    t.is(e.stdout, "len=14\n", e.stderr);
    // A command that could not start has no exit code of its own: exit 1, saying why and
    // naming the operation.
    const notRun = await u.run(["exec", c.serverName, "--cwd", "/no/such/dir-cli", "--", "true"]);
    t.is(notRun.code, 1, notRun.stderr);
    t.regex(
      notRun.stderr,
      /^working directory does not exist: \/no\/such\/dir-cli\nrelayctl: exec failed: see 'relayctl ops get [0-9a-f-]{36}'\n$/,
    );
  },
);

test.serial("cli - exit codes: usage 64, auth 77, refused 65, server unreachable 69", async (t) => {
  const u = new CliUser();
  const usage = await u.run(["exec", "--no-such-option"]);
  t.is(usage.code, 64);
  t.regex(usage.stderr, /^relayctl: unknown option '--no-such-option'/);
  const missing = await u.run(["ops", "list", "--url", c.baseUrl, "--token", c.key]);
  t.is(missing.code, 64);
  t.is(missing.stderr, "relayctl: ops list: --run-id is required\n");
  const notLoggedIn = await u.run(["whoami", "--url", c.baseUrl]);
  t.is(notLoggedIn.code, 77);
  const badKey = await u.run(["servers", "list", "--url", c.baseUrl, "--token", "rck_not-a-key"]);
  t.is(badKey.code, 77);
  t.is(badKey.stderr, "relayctl: invalid API key\n");
  const unknownOp = await u.run([
    "ops",
    "get",
    "00000000-0000-4000-8000-000000000000",
    "--url",
    c.baseUrl,
    "--token",
    c.key,
  ]);
  t.is(unknownOp.code, 65);
  t.is(unknownOp.stderr, "relayctl: operation '00000000-0000-4000-8000-000000000000' not found\n");
  // Port 2: below 1024 (no port picker or listen(0) hands it out) and not on fetch's blocked
  // list (port 1 is, "bad port"): nothing listens there, so the connection is refused.
  const down = await u.run(["whoami", "--url", "http://127.0.0.1:2", "--token", "rck_x"]);
  t.is(down.code, 69);
  t.regex(down.stderr, /^relayctl: cannot reach http:\/\/127\.0\.0\.1:\d+: ECONNREFUSED\n$/);
  t.is((await u.run(["--help"])).code, 0);
});

test.serial("cli - an expired access token is refreshed transparently and the new pair saved", async (t) => {
  const u = new CliUser();
  t.is((await login(u)).code, 0);
  const before = stored(u);
  // Wait until the server itself refuses the stored access token as expired.
  await pollUntil(
    async () => {
      const r = await request(c, "/api/me", { key: before.access_token });
      return r.status === 401 && /expired/.test(String(r.json.detail)) ? true : undefined;
    },
    { what: "the access token to expire", timeoutMs: (ACCESS_TTL_S + 5) * 1000, intervalMs: 250 },
  );
  // A credentials file someone widened is replaced, not rewritten in place: 0600 again.
  chmodSync(join(u.configDir, "credentials.json"), 0o644);
  const r = await u.run(["whoami", "--json"]);
  t.is(r.code, 0, r.stderr);
  t.is(statSync(join(u.configDir, "credentials.json")).mode & 0o777, 0o600);
  const after = stored(u);
  t.not(after.access_token, before.access_token);
  t.not(after.refresh_token, before.refresh_token);
  t.true(after.expires_at > before.expires_at);
  // The old refresh token is spent: the server treats its reuse as theft.
  const reuse = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "refresh_token",
    refresh_token: before.refresh_token,
    client_id: "relayctl-cli",
  });
  t.is(reuse.json.error, "invalid_grant");
  // ...which revoked the family, so this login has ended: auth exit code.
  const ended = await u.run(["whoami"]);
  t.is(ended.code, 77);
  t.regex(ended.stderr, /^relayctl: (OAuth access token has been revoked|your login has ended)/);
});

test.serial(
  "cli - commands started at once after expiry share one refresh; the login survives",
  async (t) => {
    const u = new CliUser();
    t.is((await login(u)).code, 0);
    const before = stored(u);
    await pollUntil(
      async () => {
        const r = await request(c, "/api/me", { key: before.access_token });
        return r.status === 401 && /expired/.test(String(r.json.detail)) ? true : undefined;
      },
      { what: "the access token to expire", timeoutMs: (ACCESS_TTL_S + 5) * 1000, intervalMs: 250 },
    );
    const reuses = async () =>
      Number(
        (
          await c.db.query(
            "SELECT COUNT(*) AS n FROM audit_events WHERE event_type = 'oauth.refresh_token_reused' AND key_id = ?",
            [owner.id],
          )
        )[0].n,
      );
    const reusedBefore = await reuses();
    // Four commands in four terminals, one login: each finds the token expired.
    const runs = await Promise.all(Array.from({ length: 4 }, () => u.run(["whoami", "--json"])));
    for (const r of runs) t.is(r.code, 0, r.stderr);
    t.not(stored(u).refresh_token, before.refresh_token);
    t.false(existsSync(join(u.configDir, "credentials.lock")));
    // No refresh token was presented twice, so the server never ended the login.
    t.is(await reuses(), reusedBefore);
    const again = await u.run(["whoami"]);
    t.is(again.code, 0, again.stderr);
  },
);

test.serial("cli - logout revokes the login on the server; a copy of its tokens is refused", async (t) => {
  const u = new CliUser();
  t.is((await login(u)).code, 0);
  const tokens = stored(u);
  const out = await u.run(["logout", "--json"]);
  t.is(out.code, 0);
  t.deepEqual(JSON.parse(out.stdout), { logged_out: true });
  t.false(existsSync(join(u.configDir, "credentials.json")));
  const me = await request(c, "/api/me", { key: tokens.access_token });
  t.is(me.status, 401);
  t.regex(String(me.json.detail), /revoked/);
  const again = await u.run(["whoami"]);
  t.is(again.code, 77);
  // A token revoked behind the CLI's back: its next command exits 77 with the server's detail.
  const v = new CliUser();
  t.is((await login(v)).code, 0);
  await postForm(c.baseUrl, "/oauth/revoke", { token: stored(v).refresh_token, client_id: "relayctl-cli" });
  const revoked = await v.run(["servers", "list"]);
  t.is(revoked.code, 77);
  t.is(revoked.stderr, "relayctl: OAuth access token has been revoked: log in again\n");
});

test.serial(
  "cli - exec still running at --timeout exits 124 naming the operation; ops get reads it",
  async (t) => {
    const u = new CliUser({ RELAYCTL_URL: c.baseUrl, RELAYCTL_TOKEN: c.key });
    const r = await u.run(["exec", c.serverId, "--timeout", "1", "--", "sleep 2; echo late"]);
    t.is(r.code, 124, r.stderr);
    const id = /relayctl ops get ([0-9a-f-]{36})/.exec(r.stderr)?.[1];
    t.truthy(id, r.stderr);
    const done = await pollUntil(
      async () => {
        const op = await u.run(["ops", "get", id!, "--json"]);
        const body = JSON.parse(op.stdout);
        return body.status === "running" ? undefined : body;
      },
      { what: "the operation to finish", timeoutMs: 30_000, intervalMs: 300 },
    );
    t.like(done, { status: "completed", result: { exit_code: 0, stdout: "late\n" } });
  },
);

test.serial("cli - RELAYCTL_TOKEN with an automation key runs exec non-interactively", async (t) => {
  const u = new CliUser({ RELAYCTL_URL: c.baseUrl, RELAYCTL_TOKEN: c.key });
  const r = await u.run(["exec", c.serverId, "--", "echo via-key"]);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, "via-key\n");
  const list = await u.run(["ops", "list", "--run-id", "none-yet", "--json"]);
  t.is(list.code, 0, list.stderr);
  t.deepEqual(JSON.parse(list.stdout).operations, []);
});

test.serial("cli - keys, registry, apps, servers and audit commands over the API", async (t) => {
  const u = new CliUser();
  t.is((await login(u)).code, 0);
  const servers = await u.run(["servers", "list"]);
  t.is(servers.code, 0, servers.stderr);
  t.regex(servers.stdout, /^ID\s+NAME\s+HOSTNAME\s+AGENT\s+LAST SEEN\s+ENGINE\s+PROXY$/m);
  t.true(servers.stdout.includes(c.serverName));

  const created = await u.run([
    "keys",
    "create",
    "ci-cli",
    "--server",
    c.serverName,
    "--operation",
    "exec",
    "--json",
  ]);
  t.is(created.code, 0, created.stderr);
  const key = JSON.parse(created.stdout);
  t.regex(key.key, /^rca_/);
  t.deepEqual(key.servers, [c.serverId]);
  t.deepEqual(key.operations, ["exec"]);
  const listed = await u.run(["keys", "list"]);
  t.regex(listed.stdout, /ci-cli/);
  t.false(listed.stdout.includes(key.key));
  const revoked = await u.run(["keys", "revoke", key.id, "--json"]);
  t.is(revoked.code, 0, revoked.stderr);
  t.deepEqual(JSON.parse(revoked.stdout), { id: key.id, revoked: true });
  t.is((await request(c, "/api/automation/v1/operations/x", { key: key.key })).status, 401);

  const secret = `s3cret-${Math.random().toString(36).slice(2)}`;
  const added = await u.run(
    ["registry", "add", "ghcr-cli", "--registry", "ghcr.io", "--username", "me", "--json"],
    {
      input: `${secret}\n`,
    },
  );
  t.is(added.code, 0, added.stderr);
  t.false(added.stdout.includes(secret));
  const cred = JSON.parse(added.stdout);
  t.is(cred.registry_type, "ghcr");
  const regs = await u.run(["registry", "list"]);
  t.regex(regs.stdout, /ghcr-cli\s+ghcr\.io\s+ghcr\s+me/);
  const removed = await u.run(["registry", "remove", cred.id, "--json"]);
  t.is(removed.code, 0, removed.stderr);
  t.deepEqual(JSON.parse(removed.stdout), { id: cred.id, removed: true });
  t.false((await u.run(["registry", "list"])).stdout.includes("ghcr-cli"));

  const app = await u.run([
    "apps",
    "create",
    "shop-cli",
    "--server",
    c.serverName,
    "--container",
    "shop-web",
    "--port",
    "3000",
    "--fqdn",
    "shop-cli.example.com",
  ]);
  t.is(app.code, 0, app.stderr);
  const apps = await u.run(["apps", "list", "--json"]);
  t.true(JSON.parse(apps.stdout).applications.some((a: { name: string }) => a.name === "shop-cli"));
  const dup = await u.run([
    "apps",
    "create",
    "shop-cli",
    "--server",
    c.serverName,
    "--container",
    "x",
    "--port",
    "1",
  ]);
  t.is(dup.code, 65);
  t.regex(dup.stderr, /^relayctl: .*already/);

  const audit = await u.run(["audit", "--json", "--limit", "1000"]);
  t.is(audit.code, 0, audit.stderr);
  const events = JSON.parse(audit.stdout).events as {
    event_type: string;
    payload: { actor?: { email?: string } };
  }[];
  const mine = events.filter((e) => e.payload.actor?.email === owner.email).map((e) => e.event_type);
  t.true(mine.includes("automation_key.created"));
  t.true(mine.includes("auth.signin"));
});

test.serial(
  "cli - apps show, servers --json, restart, ops list --run-id, and a dashboard rck_ key",
  async (t) => {
    const u = new CliUser();
    t.is((await login(u)).code, 0);
    const servers = await u.run(["servers", "list", "--json"]);
    t.is(servers.code, 0, servers.stderr);
    t.like(
      (JSON.parse(servers.stdout).servers as { id: string; name: string }[]).find((s) => s.id === c.serverId),
      { name: c.serverName },
    );

    const made = await u.run([
      "apps",
      "create",
      "show-cli",
      "--server",
      c.serverName,
      "--container",
      "show-web",
      "--port",
      "8081",
      "--fqdn",
      "show-cli.example.com",
      "--json",
    ]);
    t.is(made.code, 0, made.stderr);
    const appId = String(JSON.parse(made.stdout).id);
    const shown = await u.run(["apps", "show", "show-cli"]);
    t.is(shown.code, 0, shown.stderr);
    t.regex(shown.stdout, new RegExp(`^id\\s+${appId}$`, "m"));
    t.regex(shown.stdout, /^linked_container_name\s+show-web$/m);
    const byId = await u.run(["apps", "show", appId, "--json"]);
    t.is(byId.code, 0, byId.stderr);
    t.like(JSON.parse(byId.stdout), { id: appId, name: "show-cli", container_port: 8081 });
    const missing = await u.run(["apps", "show", "no-such-app"]);
    t.is(missing.code, 65);
    t.is(missing.stderr, "relayctl: application 'no-such-app' not found\n");

    // This agent's engine is docker without a daemon: the restart runs and fails, and so does the CLI.
    const restart = await u.run(["restart", c.serverName, "web-cli", "--run-id", "cli-run-1"]);
    t.is(restart.code, 1, restart.stderr);
    t.regex(restart.stderr, /^relayctl: restart completed \(exit [1-9]\d*\)/);
    t.is(restart.stderr.split("\n").filter(Boolean).length, 1);
    const restartJson = await u.run(["restart", c.serverName, "web-cli", "--run-id", "cli-run-1", "--json"]);
    t.is(restartJson.code, 1);
    t.like(JSON.parse(restartJson.stdout), { status: "completed" });
    const ran = await u.run(["exec", c.serverName, "--run-id", "cli-run-1", "--", "true"]);
    t.is(ran.code, 0, ran.stderr);
    const ops = await u.run(["ops", "list", "--run-id", "cli-run-1", "--json"]);
    t.is(ops.code, 0, ops.stderr);
    const listed = JSON.parse(ops.stdout).operations as { operation_type: string; run_id: string }[];
    t.deepEqual(listed.map((o) => o.operation_type).sort(), ["exec", "restart", "restart"]);
    const table = await u.run(["ops", "list", "--run-id", "cli-run-1"]);
    t.regex(table.stdout, /^ID\s+TYPE\s+SERVER\s+STATUS\s+EXIT\s+STARTED$/m);
    t.regex(table.stdout, new RegExp(`\\sexec\\s+${c.serverName}\\s+completed\\s+0\\s`));

    // --token with a dashboard API key (rck_): the dashboard commands act for the tenant.
    const { key: apiKey } = (await c.admin([
      "create-api-key",
      "--tenant",
      c.tenantId,
      "--name",
      "cli-rck",
    ])) as {
      key: string;
    };
    t.regex(apiKey, /^rck_/);
    const k = new CliUser({ RELAYCTL_URL: c.baseUrl });
    const who = await k.run(["whoami", "--json", "--token", apiKey]);
    t.is(who.code, 0, who.stderr);
    t.like(JSON.parse(who.stdout), { tenant_id: c.tenantId, key: { name: "cli-rck" } });
    const viaKey = await k.run(["apps", "list"], { env: { RELAYCTL_TOKEN: apiKey } });
    t.is(viaKey.code, 0, viaKey.stderr);
    t.regex(viaKey.stdout, /show-cli/);
  },
);

test("cli - the bash completion script completes commands, subcommands and options in bash", async (t) => {
  const r = await new CliUser().run(["completion", "bash"]);
  t.is(r.code, 0);
  const script = join(makeTempDir("completion"), "relayctl.bash");
  writeFileSync(script, r.stdout);
  // bash's completion protocol, as readline drives it: COMP_WORDS and COMP_CWORD in, COMPREPLY out.
  const complete = async (...words: string[]) => {
    const { stdout } = await run(
      "bash",
      [
        "-c",
        'source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _relayctl; printf "%s\\n" "${COMPREPLY[@]}"',
        script,
        "relayctl",
        ...words,
      ],
      { timeoutMs: 10_000 },
    );
    return stdout.split("\n").filter(Boolean).sort();
  };
  t.true((await complete("")).includes("deploy"));
  t.deepEqual(await complete("apps", "env", ""), ["--help", "list", "set", "unset"]);
  t.deepEqual(await complete("o"), ["ops"]);
  // A global option's value is not a command; an application's name is not either.
  t.deepEqual(await complete("--url", "http://x", "ops", ""), ["--help", "get", "list"]);
  t.deepEqual(await complete("deploy", "shop", "--w"), ["--wait"]);
  t.deepEqual(await complete("exec", "--timeout", ""), []);
  const zsh = await new CliUser().run(["completion", "zsh"]);
  t.is(zsh.code, 0);
  t.regex(zsh.stdout, /^autoload -U \+X bashcompinit && bashcompinit$/m);
  t.false(/\blocal\b.*\bpath\b/.test(zsh.stdout), "zsh ties `path` to PATH");
  const bad = await new CliUser().run(["completion", "fish"]);
  t.is(bad.code, 64);
});

/** The commands listed in a --help page (its "Commands:" section), without `help`. */
function subcommands(help: string): string[] {
  const section = /\nCommands:\n([\s\S]*?)(\n\n|$)/.exec(help)?.[1] ?? "";
  return section
    .split("\n")
    .map((l) => /^ {2}([a-z][a-z-]*)/.exec(l)?.[1])
    .filter((n): n is string => n !== undefined && n !== "help");
}

test("cli - --help on every command exits 0 with examples and lists --json", async (t) => {
  const u = new CliUser();
  const seen: string[] = [];
  const walk = async (path: string[]) => {
    const r = await u.run([...path, "--help"]);
    const name = ["relayctl", ...path].join(" ");
    t.is(r.code, 0, name);
    t.regex(r.stdout, /\nExamples?( \([^)]*\))?:\n {2}\S/, `${name}: examples`);
    t.regex(r.stdout, /^ {2}--json +print the answer as JSON/m, `${name}: --json`);
    seen.push(name);
    for (const sub of subcommands(r.stdout)) await walk([...path, sub]);
  };
  await walk([]);
  // The walk reached every command the issue names.
  for (const cmd of [
    "login",
    "logout",
    "whoami",
    "servers list",
    "apps list",
    "apps show",
    "apps create",
    "apps env set",
    "apps env unset",
    "deploy",
    "exec",
    "restart",
    "ops get",
    "ops list",
    "keys create",
    "keys list",
    "keys revoke",
    "audit",
    "registry add",
    "registry list",
    "registry remove",
    "completion",
  ])
    t.true(seen.includes(`relayctl ${cmd}`), cmd);
});
