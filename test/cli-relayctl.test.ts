// The built relayctl CLI run as a process against a running control plane and agent
// (cli-stack.ts): exec passthrough, --json, exit codes for usage, auth and server errors, exec's
// --timeout, an automation key in RELAYCTL_TOKEN, and the key/registry/app/server/audit/restart/ops
// commands. Login and refresh: cli-relayctl-login.test.ts; --help and completion:
// cli-relayctl-help.test.ts.
import test from "ava";
import { cleanupAll } from "./harness/cleanup";
import { CliUser } from "./harness/cli";
import { type CliStack, startCliStack } from "./harness/cli-stack";
import type { Cluster } from "./harness/cluster";
import { request, waitForOperationEnd } from "./harness/http";
import type { Person } from "./harness/people";

let c: Cluster;
let owner: Person;
let login: CliStack["login"];

test.before(async () => {
  ({ c, owner, login } = await startCliStack());
});
test.after.always(cleanupAll);

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

test.serial(
  "cli - exec still running at --timeout exits 124 naming the operation; ops get reads it",
  async (t) => {
    const u = new CliUser({ RELAYCTL_URL: c.baseUrl, RELAYCTL_TOKEN: c.key });
    const r = await u.run(["exec", c.serverId, "--timeout", "1", "--", "sleep 2; echo late"]);
    t.is(r.code, 124, r.stderr);
    const id = /relayctl ops get ([0-9a-f-]{36})/.exec(r.stderr)?.[1];
    t.truthy(id, r.stderr);
    // Waited for over HTTP (a CLI process per poll costs ~0.3 s of CPU), then read with the CLI.
    await waitForOperationEnd(c, id!, 30_000);
    const op = await u.run(["ops", "get", id!, "--json"]);
    t.is(op.code, 0, op.stderr);
    t.like(JSON.parse(op.stdout), { status: "completed", result: { exit_code: 0, stdout: "late\n" } });
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
  t.regex(
    servers.stdout,
    /^ID\s+NAME\s+CONNECTED\s+HOSTNAME\s+AGENT\s+LAST SEEN\s+ENGINE\s+PROXY\s+LABELS$/m,
  );
  // The cluster's agent is connected now: its row says so.
  t.regex(servers.stdout, new RegExp(`^${c.serverId}\\s+${c.serverName}\\s+yes\\s`, "m"));

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
