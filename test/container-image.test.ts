// The control-plane image from deploy/Dockerfile, built and run with podman
// (DESIGN.md, Facts). Nothing can be pulled here, so the runtime base is made
// from the node binary the tests run on (Node 24: the Makefile's, or .tools/'s)
// and the shared libraries it links (`ldd`), FROM scratch, and cached by content
// hash; the Dockerfile takes it as BASE (operators keep the default
// node:24-bookworm-slim). Not /usr/bin/node: the machine's own Node is 20. The app comes from
// deploy/image-context.sh (APP_FROM=context: the built tree, no npm or
// compiler in the build). The image then runs the api role against the
// harness's MariaDB and NATS on the host network: /healthz answers 200, the
// image's own admin CLI makes a tenant and an API key, and authenticated calls
// work. deploy/compose.yaml is checked against the image and the config.
// podman keeps the context stage as build cache (one per distinct built tree),
// so a second run with the same build reuses it.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import test from "ava";
import { run } from "@relayctl/devkit";
import { parse } from "yaml";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { podman } from "./harness/containers";
import { request } from "./harness/http";
import { sharedMariaDb } from "./harness/mariadb";
import { sharedNats } from "./harness/nats";
import { freePort } from "./harness/ports";
import { REPO_ROOT } from "./harness/programs";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

const NODE = process.execPath;
const NODE_MAJOR = process.versions.node.split(".")[0];
const suffix = Math.random().toString(36).slice(2, 8);
const APP_IMAGE = `localhost/relayctl-test-server:${suffix}`;
const MASTER_KEY = "cmVsYXljdGwtdGVzdC1tYXN0ZXIta2V5LTMyYnl0ZXM=";

/** The files of a minimal node runtime: the binary, its shared libraries, CA certificates. */
function runtimeFiles(): string[] {
  const libs = execFileSync("ldd", [NODE], { encoding: "utf8" })
    .split("\n")
    .map((l) => /(\/\S+) \(0x/.exec(l)?.[1])
    .filter((f): f is string => Boolean(f));
  return [NODE, ...libs, "/etc/ssl/certs/ca-certificates.crt"];
}

/** localhost/relayctl-test-node<major>:<hash of those files>, built once per content. */
async function nodeBaseImage(): Promise<string> {
  const files = runtimeFiles();
  const hash = createHash("sha256");
  for (const f of files) hash.update(f).update(readFileSync(f));
  const image = `localhost/relayctl-test-node${NODE_MAJOR}:${hash.digest("hex").slice(0, 16)}`;
  if (
    await podman(["image", "exists", image]).then(
      () => true,
      () => false,
    )
  )
    return image;
  const ctx = makeTempDir("node-base");
  for (const f of files) {
    const to = join(ctx, "rootfs", f === NODE ? "/usr/local/bin/node" : f);
    mkdirSync(dirname(to), { recursive: true });
    copyFileSync(f, to);
  }
  mkdirSync(join(ctx, "rootfs/tmp"), { mode: 0o1777 });
  writeFileSync(
    join(ctx, "Containerfile"),
    "FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin\n",
  );
  await podman(["build", "-q", "-t", image, ctx]);
  return image;
}

let apiUrl: string;
let apiKey: string;
let buildImage: () => Promise<unknown>;

/**
 * A podman call on the image, made again once after building the image again when the shared
 * store lost it. The harness tries a call that meets the store's race for ~18 s; a CI run on the
 * slow-fork machine (2026-12-02) still read "image not known" for the whole of it, right after
 * the build returned 0, while other files built and removed images beside it. The second build
 * comes from podman's layer cache: seconds.
 */
async function onImage(args: string[]): Promise<{ stdout: string; stderr: string }> {
  try {
    return await podman(args);
  } catch (err) {
    if (!/image not known/.test(String((err as { stderr?: string }).stderr ?? err))) throw err;
    await buildImage();
    return podman(args);
  }
}

test.before(async () => {
  const [base, nats, mariadb] = await Promise.all([nodeBaseImage(), sharedNats(), sharedMariaDb()]);
  const ctx = makeTempDir("image-context");
  await run("bash", [join(REPO_ROOT, "deploy/image-context.sh"), ctx], { timeoutMs: 120_000 });
  onCleanup(() => podman(["rmi", "-f", APP_IMAGE]).then(() => undefined));
  buildImage = () =>
    podman([
      "build",
      "-q",
      "--build-arg",
      `BASE=${base}`,
      "--build-arg",
      "APP_FROM=context",
      "-t",
      APP_IMAGE,
      "-f",
      join(REPO_ROOT, "deploy/Dockerfile"),
      ctx,
    ]);
  await buildImage();

  const db = await mariadb.createDatabase();
  const port = await freePort();
  apiUrl = `http://127.0.0.1:${port}`;
  const env = [
    `RELAYCTL_DATABASE_URL=${db.url}`,
    `RELAYCTL_NATS_URL=${nats.url}`,
    `RELAYCTL_MASTER_KEY=${MASTER_KEY}`,
  ].flatMap((e) => ["-e", e]);
  const name = `relayctl-test-api-${suffix}`;
  onCleanup(() => podman(["rm", "-f", "-t", "0", name]).then(() => undefined));
  await onImage([
    "run",
    "-d",
    // The image was just built here: never a pull (a store race then reads "image not known",
    // which the harness tries again, instead of a pull from a registry named localhost).
    "--pull=never",
    "--init",
    "--network",
    "host",
    "--name",
    name,
    ...env,
    "-e",
    "RELAYCTL_ROLE=api",
    "-e",
    `RELAYCTL_API_LISTEN=127.0.0.1:${port}`,
    "-e",
    "RELAYCTL_PUBLIC_GATEWAY_URLS=grpc://127.0.0.1:8443",
    APP_IMAGE,
  ]);
  await pollUntil(
    async () =>
      (await request({ baseUrl: apiUrl }, "/healthz", { timeoutMs: 2_000 })).status === 200
        ? true
        : undefined,
    { what: `the containerised api at ${apiUrl}/healthz`, timeoutMs: 60_000, intervalMs: 200 },
  ).catch(async (err) => {
    throw new Error(`${err.message}\n${(await podman(["logs", name]).catch((e) => e)).stdout ?? ""}`);
  });

  // The image's own admin CLI, one-shot containers on the same database.
  const admin = async (args: string[]) => {
    const out = await onImage([
      "run",
      "--rm",
      "--pull=never",
      "--network",
      "host",
      ...env,
      APP_IMAGE,
      "admin",
      ...args,
    ]);
    return JSON.parse(out.stdout.trim().split("\n").pop()!) as Record<string, string>;
  };
  const tenant = await admin(["create-tenant", "--name", `image-${suffix}`]);
  apiKey = (await admin(["create-api-key", "--tenant", tenant.tenant_id!, "--name", "ops"])).key!;
});

test("container image - the api role runs from the image: /healthz and authenticated calls work", async (t) => {
  const health = await request({ baseUrl: apiUrl }, "/healthz");
  t.is(health.status, 200, describe(health));
  const headers = { "x-api-key": apiKey };
  const tenant = await request({ baseUrl: apiUrl }, "/api/tenant", { key: null, headers });
  t.is(tenant.status, 200, describe(tenant));
  t.is(tenant.json.name, `image-${suffix}`);
  const created = await request({ baseUrl: apiUrl }, "/api/automation-keys", {
    key: null,
    headers,
    body: { name: "from-image" },
  });
  t.is(created.status, 201, describe(created));
  t.regex(String(created.json.key), /^rca_/);
  const refused = await request({ baseUrl: apiUrl }, "/api/tenant", {
    key: null,
    headers: { "x-api-key": "rck_nope" },
  });
  t.is(refused.status, 401, describe(refused));
  // Servers are set up from the image too: the installer and the agent bundles it downloads.
  const installer = await request({ baseUrl: apiUrl }, "/install.sh", { key: null });
  t.is(installer.status, 200, describe(installer));
  t.true(installer.text.includes(apiUrl), "install.sh carries the control plane's own URL");
  const latest = await request({ baseUrl: apiUrl }, "/agent/latest", { key: null });
  t.is(latest.status, 200, describe(latest));
  t.true((latest.json.bundles as unknown[]).length > 0);
});

test("container image - the control plane runs on Node 24 (Node 20 reached end of life)", async (t) => {
  const version = await onImage([
    "run",
    "--rm",
    "--entrypoint",
    "node",
    APP_IMAGE,
    "-p",
    "process.versions.node",
  ]);
  t.true(Number(version.stdout.trim().split(".")[0]) >= 24, `the image's node is ${version.stdout.trim()}`);
});

test("container image - runs as uid 1000 and holds only the runtime tree", async (t) => {
  const inspect = JSON.parse((await onImage(["image", "inspect", APP_IMAGE])).stdout)[0].Config;
  t.is(inspect.User, "1000:1000");
  t.deepEqual(inspect.Entrypoint, ["node", "/opt/relayctl/control-plane/dist/cli/main.js"]);
  t.deepEqual(Object.keys(inspect.ExposedPorts ?? {}).sort(), ["8080/tcp", "8443/tcp"]);
  const ls = await onImage([
    "run",
    "--rm",
    "--entrypoint",
    "node",
    APP_IMAGE,
    "-e",
    "console.log(require('fs').readdirSync('/opt/relayctl').sort().join(' '))",
  ]);
  t.is(
    ls.stdout.trim(),
    "agent control-plane deploy node_modules package.json proto reverse-proxy-sync tracing web",
  );
});

test("container image - compose.yaml builds this Dockerfile and sets only real variables", (t) => {
  const compose = parse(readFileSync(join(REPO_ROOT, "deploy/compose.yaml"), "utf8"), { merge: true });
  const config = readFileSync(join(REPO_ROOT, "control-plane/src/config-schema.ts"), "utf8");
  const services = Object.entries(compose.services as Record<string, Record<string, unknown>>).filter(
    ([, s]) => (s.build as { dockerfile?: string } | undefined)?.dockerfile === "deploy/Dockerfile",
  );
  const roles = services.map(([, s]) => (s.environment as Record<string, string>).RELAYCTL_ROLE);
  t.deepEqual([...new Set(roles)].sort(), ["api", "gateway"]);
  for (const [name, s] of services) {
    const env = s.environment as Record<string, string>;
    for (const key of Object.keys(env).filter((k) => k.startsWith("RELAYCTL_")))
      t.true(config.includes(`${key}:`), `${name}: ${key} is not a control-plane setting`);
    const port = env.RELAYCTL_ROLE === "api" ? "8080" : "8443";
    for (const p of (s.ports as string[] | undefined) ?? []) t.true(p.endsWith(`:${port}`), `${name}: ${p}`);
  }
});
