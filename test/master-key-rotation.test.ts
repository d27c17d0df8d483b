// Rotating RELAYCTL_MASTER_KEY on MariaDB through the admin CLI, the way an
// operator does it (docs/operating.md): pin the audit chain's key, dry-run,
// rotate, restart every instance with the new key. Then a registry login still
// works (the stored password opens under the new key and reaches a real
// registry), a deployment still fetches with the stored git credential from a
// private git host and its container gets the stored env values (a real podman
// agent), every sealed value opens under the new key and none under the old one,
// and the audit chain written before and after still verifies. Refusals (a wrong
// old key, an unpinned audit key) write nothing.
import { createDecipheriv, randomBytes } from "node:crypto";
import { basename, dirname, join } from "node:path";
import test from "ava";
import { run } from "@relayctl/devkit";
import { Agent, enroll } from "./harness/agent";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { podmanAgentEnv, removeAppContainers, removeAppImages } from "./harness/containers";
import { TEST_MASTER_KEY } from "./harness/control-plane";
import { type GitHttpServer, startGitHttp } from "./harness/git-http";
import { APP_PORT, createAppRepo } from "./harness/git-repo";
import { type ApiTarget, api, request, waitForOperationEnd } from "./harness/http";
import { cleanEnv } from "./harness/process";
import { SERVER_MAIN, parseJsonOutput } from "./harness/programs";
import { proxyGet } from "./harness/proxy-client";
import { startRegistry } from "./harness/registry";

const NEW_MASTER_KEY = randomBytes(32).toString("base64");
const REGISTRY_PASSWORD = `regpw-${randomBytes(8).toString("hex")}`;
const PROVIDER_TOKEN = `hcloud-${randomBytes(8).toString("hex")}`;
const GIT_PASSWORD = `gitpw-${randomBytes(8).toString("hex")}`;
const ENV_VALUES = { DB_PASSWORD: `envpw-${randomBytes(8).toString("hex")}`, GREETING: "hello" };
const FORGE_TOKEN = `forge-${randomBytes(8).toString("hex")}`;
const PREVIEW_VALUE = `preview-${randomBytes(8).toString("hex")}`;
/** Every secret sealed before the rotation; the Gitea connection's webhook secret joins it (made by the server). */
const PLANTED = [
  REGISTRY_PASSWORD,
  PROVIDER_TOKEN,
  GIT_PASSWORD,
  ...Object.values(ENV_VALUES),
  FORGE_TOKEN,
  PREVIEW_VALUE,
];

let c: Cluster;
let apiKey: string;
let registry: string;
let credentialId: string;
let pinnedAuditKey: string;
let git: GitHttpServer;
let appId: string;
/** The podman agent that deploys (the cluster's own agent logs in with the daemon-less docker CLI). */
let deployer: Agent;

/** `relayctl-server admin <args>` with exactly these RELAYCTL_* variables; never throws. */
async function admin(args: string[], env: Record<string, string>) {
  try {
    const { stdout, stderr } = await run(process.execPath, [SERVER_MAIN, "admin", ...args], {
      env: cleanEnv({ RELAYCTL_DATABASE_URL: c.db.url, RELAYCTL_LOG_LEVEL: "warn", ...env }),
      timeoutMs: 60_000,
    });
    return { code: 0, json: parseJsonOutput(stdout, `admin ${args[0]}`), stderr };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    return { code: 1, json: {}, stderr: `${e.stderr ?? ""}${e.stdout ?? ""}` };
  }
}

/** registry/crypto.ts's stored form, base64(iv[12] | tag[16] | ciphertext), opened here independently. */
function openSealed(keyB64: string, sealed: string): string {
  const raw = Buffer.from(sealed, "base64");
  const d = createDecipheriv("aes-256-gcm", Buffer.from(keyB64, "base64"), raw.subarray(0, 12));
  d.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString("utf8");
}

async function sealedValues(): Promise<string[]> {
  const q = (sql: string) => c.db.query<{ v: string }>(sql).then((rows) => rows.map((r) => r.v));
  return [
    ...(await q("SELECT password_ciphertext AS v FROM registry_credentials")),
    ...(await q("SELECT token_ciphertext AS v FROM server_providers")),
    ...(await q("SELECT git_password_sealed AS v FROM applications WHERE git_password_sealed IS NOT NULL")),
    ...(await q("SELECT value_sealed AS v FROM application_env ORDER BY name")),
    ...(await q("SELECT value_sealed AS v FROM application_preview_env ORDER BY name")),
    ...(await q("SELECT api_token_sealed AS v FROM forge_connections")),
    ...(await q(
      "SELECT webhook_secret_sealed AS v FROM forge_connections WHERE webhook_secret_sealed IS NOT NULL",
    )),
  ];
}

const manage = (target: ApiTarget, path: string, opts: Parameters<typeof request>[2] = {}) =>
  request(target, `/api${path}`, { ...opts, key: null, headers: { "x-api-key": apiKey } });

test.before(async () => {
  registry = (await startRegistry("puller", REGISTRY_PASSWORD)).host;
  c = await startCluster({
    agentEnv: {
      DOCKER_CONFIG: makeTempDir("docker-config"),
      RELAYCTL_AGENT_CONTAINER_ENGINE: "docker",
      PATH: `/usr/local/bin:${process.env.PATH}`,
    },
  });
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ops"])).key);

  const cred = await manage(c, "/registry-credentials", {
    body: {
      name: "reg",
      registry_url: `http://${registry}`,
      username: "puller",
      password: REGISTRY_PASSWORD,
    },
  });
  if (cred.status !== 201) throw new Error(`registry credential: ${describe(cred)}`);
  credentialId = String(cred.json.id);
  const bound = await manage(c, `/servers/${c.serverId}/provider`, {
    method: "PUT",
    body: { provider: "hetzner", provider_server_id: "4711", token: PROVIDER_TOKEN },
  });
  if (bound.status !== 200) throw new Error(`provider binding: ${describe(bound)}`);
  const repo = await createAppRepo({ first: "rotated" });
  git = await startGitHttp(dirname(repo.path), "deployer", GIT_PASSWORD);
  const token = await c.admin(["create-join-token", "--tenant", c.tenantId, "--server-name", "deployer"]);
  const stateDir = join(c.dir, "agent-deployer");
  const server = await enroll(c.api.apiUrl, String(token.join_token), stateDir);
  deployer = await new Agent(stateDir, c.dir, podmanAgentEnv).start();
  const name = `rotated-${Math.random().toString(36).slice(2, 8)}`;
  const app = await manage(c, "/applications", {
    body: {
      name,
      server_id: server.server_id,
      linked_container_name: name,
      container_port: APP_PORT,
      git_repository: git.url(basename(repo.path)),
      git_credential: { username: "deployer", password: GIT_PASSWORD },
      build: { type: "dockerfile" },
    },
  });
  if (app.status !== 201) throw new Error(`application: ${describe(app)}`);
  appId = String(app.json.id);
  onCleanup(async () => {
    await removeAppContainers(appId);
    await removeAppImages(appId);
  });
  const env = await manage(c, `/tenants/${c.tenantId}/applications/${app.json.id}/env`, {
    body: { variables: ENV_VALUES },
  });
  if (env.status !== 200) throw new Error(`env: ${describe(env)}`);
  const previewEnv = await manage(c, `/applications/${appId}/preview-env`, {
    method: "PUT",
    body: { variables: { PREVIEW_SECRET: PREVIEW_VALUE } },
  });
  if (previewEnv.status !== 200) throw new Error(`preview env: ${describe(previewEnv)}`);
  const forge = await manage(c, "/forges", {
    body: { kind: "gitea", name: "git", base_url: "http://127.0.0.1:3000", api_token: FORGE_TOKEN },
  });
  if (forge.status !== 201) throw new Error(`forge connection: ${describe(forge)}`);
  PLANTED.push(String(forge.json.webhook_secret));
});
test.after.always(cleanupAll);

const OLD_ENV = { RELAYCTL_MASTER_KEY: TEST_MASTER_KEY, RELAYCTL_NEW_MASTER_KEY: NEW_MASTER_KEY };

test.serial("master key rotation - refused while the audit key is derived from the master key", async (t) => {
  const before = await sealedValues();
  const refused = await admin(["rotate-master-key"], OLD_ENV);
  t.is(refused.code, 1);
  t.regex(refused.stderr, /audit chain's key is derived from RELAYCTL_MASTER_KEY.*admin audit-hmac-key/);
  t.deepEqual(await sealedValues(), before);

  const pinned = await admin(["audit-hmac-key"], { RELAYCTL_MASTER_KEY: TEST_MASTER_KEY });
  t.is(pinned.code, 0, pinned.stderr);
  t.is(pinned.json.source, "RELAYCTL_MASTER_KEY");
  pinnedAuditKey = String(pinned.json.audit_hmac_key);
  t.is(Buffer.from(pinnedAuditKey, "base64").length, 32);
});

test.serial(
  "master key rotation - a wrong old key is refused, naming the rows, and nothing changes",
  async (t) => {
    const before = await sealedValues();
    t.is(before.length, PLANTED.length);
    const wrong = await admin(["rotate-master-key"], {
      ...OLD_ENV,
      RELAYCTL_MASTER_KEY: randomBytes(32).toString("base64"),
      RELAYCTL_AUDIT_HMAC_KEY: pinnedAuditKey,
    });
    t.is(wrong.code, 1);
    t.regex(wrong.stderr, /nothing re-sealed: 8 stored secret\(s\) open under neither/);
    t.true(
      wrong.stderr.includes(`registry_credentials.password_ciphertext (id=${credentialId})`),
      wrong.stderr,
    );
    for (const secret of PLANTED) t.false(wrong.stderr.includes(secret));
    t.deepEqual(await sealedValues(), before);
  },
);

test.serial(
  "master key rotation - dry run, rotate, run again; the restarted control plane uses the new key",
  async (t) => {
    const env = { ...OLD_ENV, RELAYCTL_AUDIT_HMAC_KEY: pinnedAuditKey };
    const before = await sealedValues();
    const dry = await admin(["rotate-master-key", "--dry-run"], env);
    t.is(dry.code, 0, dry.stderr);
    t.like(dry.json, { dry_run: true, resealed: 8, already_new_key: 0 });
    t.deepEqual(await sealedValues(), before, "a dry run writes nothing");

    const rotated = await admin(["rotate-master-key"], env);
    t.is(rotated.code, 0, rotated.stderr);
    t.like(rotated.json, { dry_run: false, resealed: 8, already_new_key: 0 });
    t.deepEqual(
      (rotated.json.columns as { table: string; resealed: number }[]).map((x) => [x.table, x.resealed]),
      [
        ["registry_credentials", 1],
        ["server_providers", 1],
        ["applications", 1],
        ["application_env", 2],
        // Releases' sealed env: this application has not been deployed yet.
        ["deployments", 0],
        ["application_preview_env", 1],
        // The Gitea connection's API token, then its webhook secret.
        ["forge_connections", 1],
        ["forge_connections", 1],
      ],
    );
    const again = await admin(["rotate-master-key"], env);
    t.like(again.json, { resealed: 0, already_new_key: 8 }, again.stderr);

    const after = await sealedValues();
    t.deepEqual(
      after.map((v) => openSealed(NEW_MASTER_KEY, v)).sort(),
      [...PLANTED].sort(),
      "every secret opens under the new key",
    );
    for (const v of after)
      t.throws(() => openSealed(TEST_MASTER_KEY, v), undefined, "the old key opens nothing");

    // Every instance restarts with the new key and the pinned audit key.
    for (const cp of [c.gateway, c.api]) {
      cp.opts.env = {
        ...cp.opts.env,
        RELAYCTL_MASTER_KEY: NEW_MASTER_KEY,
        RELAYCTL_AUDIT_HMAC_KEY: pinnedAuditKey,
      };
    }
    const marks = [c.agent.proc.mark(), deployer.proc.mark()];
    await c.gateway.restart("SIGTERM");
    await c.api.restart("SIGTERM");
    await c.agent.waitForConnected(marks[0]!, 30_000);
    await deployer.waitForConnected(marks[1]!, 30_000);
    const target = { baseUrl: c.api.apiUrl, key: c.key };
    const login = await api(target, "/registry-auth/login", {
      body: { server_id: c.serverId, credential_id: credentialId },
    });
    t.is(login.status, 202, describe(login));
    const op = await waitForOperationEnd(target, String(login.json.operation_id), 30_000);
    t.like(op.json, { status: "completed", result: { exit_code: 0 } }, describe(op));
    t.regex(String((op.json.result as { stdout: string }).stdout), /Login Succeeded/);

    // A deployment: the git credential and the env values open under the new key.
    const started = await api(target, "/deploy", { body: { application_id: appId, timeout_seconds: 120 } });
    t.is(started.status, 202, describe(started));
    const deployed = await waitForOperationEnd(target, String(started.json.operation_id), 150_000);
    t.like(deployed.json, { status: "completed", result: { exit_code: 0 } }, describe(deployed));
    t.true(git.requests.some((r) => r.authorized && r.path.includes("git-upload-pack")));
    const view = await manage(
      target,
      `/tenants/${c.tenantId}/applications/${appId}/deployments/${started.json.deployment_id}`,
    );
    const port = Number(view.json.host_port);
    t.true(port > 0, describe(view));
    const envOf = async (v: string) => (await proxyGet(port, "localhost", `/cgi-bin/env?${v}`)).body;
    t.is(await envOf("DB_PASSWORD"), ENV_VALUES.DB_PASSWORD);
    t.is(await envOf("GREETING"), ENV_VALUES.GREETING);

    // The trail spans both keys' lifetimes and verifies under the pinned key.
    const verified = await admin(["audit", "verify"], {
      RELAYCTL_MASTER_KEY: NEW_MASTER_KEY,
      RELAYCTL_AUDIT_HMAC_KEY: pinnedAuditKey,
    });
    t.is(verified.code, 0, verified.stderr);
    t.is(verified.json.ok, true, JSON.stringify(verified.json));
    for (const secret of PLANTED.filter((s) => s !== "hello"))
      t.false(c.logText().includes(secret), "no secret in the logs");
  },
);
