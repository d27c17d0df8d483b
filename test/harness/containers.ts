// Real containers for the tests, run with podman the way DESIGN.md "Facts" says
// works here: runc (crun fails on rlimits), an image built FROM scratch with
// busybox-static, `--init` so a stop is quick. A web container serves
// `backend <name>` on one container port per name, each published on
// 127.0.0.1:<free port>, so a test sees which port a domain reaches. Names get a
// random suffix: test files and other runs share the machine's podman.
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { promisify } from "node:util";
import { makeTempDir, onCleanup } from "./cleanup";
import { freePort } from "./ports";
import { proxyGet } from "./proxy-client";
import { pollUntil } from "./wait";

const run = promisify(execFile);

const CONTAINERS_CONF = "/tmp/relayctl-test-containers.conf";
/** The busybox image every test container runs; test images build FROM it (a local image: no pull). */
export const BASE_IMAGE = "localhost/relayctl-test-busybox:1";
const IMAGE = BASE_IMAGE;

if (!existsSync(CONTAINERS_CONF)) {
  writeFileSync(CONTAINERS_CONF, '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n');
}

/** Env of an agent that checks ports with this podman (auto would pick the daemon-less docker CLI). */
export const podmanAgentEnv: Record<string, string> = {
  RELAYCTL_AGENT_CONTAINER_ENGINE: "podman",
  CONTAINERS_CONF,
};

/**
 * podman's image store is shared by every test file running at once: a build
 * whose layer cache lookup, or a list or run whose image lookup, meets an image
 * another file is removing fails with "layer not known" or "image not known".
 * That is a race of the store, not of the code under test: the call is tried
 * again (the agent does the same: image-step.ts, containers/cleanup.ts). A
 * store of one server's own meets the same race with its agent's image
 * cleanup (a fleet test's build beside a deploy's retention).
 */
const STORE_RACE = /layer not known|image not known|identifier is not a layer/;
const RACY = new Set(["build", "images", "ps", "run"]);
/**
 * Tries of a call that met the race, waiting 0.25, 0.5, 1, 2, 4 and then 5 s between them (~18 s
 * in all): on the slow-fork machine, under a full run, a `podman run` of an image built a moment
 * before met "image not known" five times over 3.75 s of waits (2026-12-02).
 */
const STORE_RACE_ATTEMPTS = 8;
const STORE_RACE_FIRST_WAIT_MS = 250;
const STORE_RACE_MAX_WAIT_MS = 5_000;

export function podman(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return podmanOn({ CONTAINERS_CONF }, args);
}

/** podman with `env` on top of this process's (a store of its own: fleet-stack.ts), tried again on the store's race. */
export async function podmanOn(
  env: Record<string, string>,
  args: string[],
): Promise<{ stdout: string; stderr: string }> {
  const once = () => run("podman", args, { env: { ...process.env, ...env }, timeout: 120_000 });
  for (let attempt = 1; ; attempt++) {
    try {
      return await once();
    } catch (err) {
      const raced = STORE_RACE.test(String((err as { stderr?: string }).stderr ?? err));
      if (!RACY.has(args[0] ?? "") || !raced || attempt >= STORE_RACE_ATTEMPTS) throw err;
      // Backing off: on a loaded machine another file's removal holds the store for a while,
      // and three tries in a row met it each time (a CI run's `podman run` of a just-built image).
      await delay(Math.min(STORE_RACE_FIRST_WAIT_MS * 2 ** (attempt - 1), STORE_RACE_MAX_WAIT_MS));
    }
  }
}

/**
 * `-p` arguments publishing `containerPort` on 127.0.0.1:<hostPort, a claimed port below the kernel's
 * ephemeral range> (freePort). Not `-p 127.0.0.1::<port>`: podman 4 picks that port by binding
 * port 0, from the ephemeral range, where a container podman restarted or stopped can still hold
 * DNAT rules for a port its conmon no longer binds (start-step.ts: the agent's deployed containers,
 * in tests with the container watcher off, keep podman's restart policy). A port handed out there
 * is then cut off: the proxy's connections to it go to the dead container's address and are
 * refused (a CI run's external-deploy-view answered 502 for 10 s). A claimed port below the range
 * is no other process's pick.
 */
export async function publishOnFreePort(
  containerPort: number,
): Promise<{ args: string[]; hostPort: number }> {
  const hostPort = await freePort();
  return { args: ["-p", `127.0.0.1:${hostPort}:${containerPort}`], hostPort };
}

/** The host port podman published `containerPort` on, for a container run with podman's pick. */
export async function publishedPort(name: string, containerPort: number): Promise<number> {
  const { stdout } = await podman(["port", name, `${containerPort}/tcp`]);
  const m = /^127\.0\.0\.1:(\d+)$/m.exec(stdout);
  if (!m)
    throw new Error(`podman port ${name} ${containerPort}: no 127.0.0.1 port in ${JSON.stringify(stdout)}`);
  return Number(m[1]);
}

let image: Promise<void> | undefined;

/** Builds BASE_IMAGE once per process when podman does not have it yet. */
export function buildBaseImage(): Promise<void> {
  image ??= (async () => {
    const exists = await podman(["image", "exists", IMAGE]).then(
      () => true,
      () => false,
    );
    if (exists) return;
    const ctx = makeTempDir("image");
    copyFileSync("/bin/busybox", join(ctx, "busybox"));
    writeFileSync(
      join(ctx, "Containerfile"),
      'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n',
    );
    await podman(["build", "-q", "-t", IMAGE, ctx]);
  })();
  return image;
}

/** Removes every container the agent ran for the application (its `relayctl.application` label). */
export async function removeAppContainers(applicationId: string): Promise<void> {
  const label = `label=relayctl.application=${applicationId}`;
  const ids = (await podman(["ps", "-a", "-q", "--filter", label])).stdout.split("\n").filter(Boolean);
  if (ids.length > 0) await podman(["rm", "-f", "-t", "0", ...ids]);
}

/** `<id> <repository>:<tag>` of each image tagged in the application's repository `relayctl/<id>`. */
async function appImageTags(applicationId: string): Promise<{ id: string; ref: string }[]> {
  const out = await podman(["images", "--no-trunc", "--format", "{{.ID}} {{.Repository}}:{{.Tag}}"]);
  return out.stdout
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter(([, ref]) => (ref ?? "").replace(/^localhost\//, "").startsWith(`relayctl/${applicationId}:`))
    .map(([id = "", ref = ""]) => ({ id: id.startsWith("sha256:") ? id : `sha256:${id}`, ref }));
}

/**
 * Ids (`sha256:...`) of the images the agent built for the application: tagged in its
 * repository `relayctl/<application id>` (built images carry no labels: the agent's
 * deploy/image-ledger.ts). Filtered here by the tag's prefix: podman's reference filter
 * also lists every other tag of a matching image.
 */
export async function appImageIds(applicationId: string): Promise<string[]> {
  return [...new Set((await appImageTags(applicationId)).map((i) => i.id))].sort();
}

/**
 * Removes the images the agent built for the application (a test's own cleanup), by
 * their tags: without labels, two applications built from the same files share one
 * image (podman's layer cache gives the same id), and removing it by id would take it
 * from under another test's application.
 */
export async function removeAppImages(applicationId: string): Promise<void> {
  const refs = (await appImageTags(applicationId)).map((i) => i.ref);
  if (refs.length > 0) await podman(["image", "rm", ...refs]).catch(() => undefined);
}

export interface WebContainer {
  name: string;
  /** The container port that serves `backend <backend>`. */
  containerPort(backend: string): number;
  /** The host port (on 127.0.0.1) that container port is published on. */
  hostPort(backend: string): number;
  stop(): Promise<void>;
}

export interface WebContainerOptions {
  /** Container ports exposed but not published (`--expose`). */
  expose?: number[];
  /** `--label` entries (e.g. com.docker.compose.service, as compose sets it). */
  labels?: Record<string, string>;
}

/** A running container `<prefix>-<random>` serving each backend on container port 8001, 8002... */
export async function startWebContainer(
  prefix: string,
  backends: string[],
  opts: WebContainerOptions = {},
): Promise<WebContainer> {
  if (!backends.every((b) => /^[\w.-]+$/.test(b))) throw new Error(`bad backend names: ${backends}`);
  await buildBaseImage();
  const name = `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
  const containerPorts = new Map(backends.map((b, i) => [b, 8001 + i]));
  const serve = [...containerPorts].map(
    ([b, port]) =>
      `mkdir -p /www/${b} && printf 'backend ${b}' > /www/${b}/index.html && httpd -p ${port} -h /www/${b}`,
  );
  const args = ["run", "-d", "--init", "--name", name];
  const ports = new Map<string, { container: number; host: number }>();
  for (const [b, container] of containerPorts) {
    const published = await publishOnFreePort(container);
    args.push(...published.args);
    ports.set(b, { container, host: published.hostPort });
  }
  for (const port of opts.expose ?? []) args.push("--expose", String(port));
  for (const [k, v] of Object.entries(opts.labels ?? {})) args.push("--label", `${k}=${v}`);
  await podman([...args, IMAGE, "sh", "-c", `${serve.join(" && ")} && exec sleep 2147483647`]);
  const stop = () => podman(["rm", "-f", "-t", "0", name]).then(() => undefined);
  onCleanup(stop);
  for (const [b, p] of ports) {
    await pollUntil(
      async () =>
        (await proxyGet(p.host, "x").catch(() => undefined))?.body === `backend ${b}` ? true : undefined,
      { what: `container ${name} to serve backend ${b} on 127.0.0.1:${p.host}`, timeoutMs: 20_000 },
    );
  }
  const get = (b: string) => {
    const p = ports.get(b);
    if (!p) throw new Error(`container ${name} has no backend ${b}`);
    return p;
  };
  return {
    name,
    containerPort: (b) => get(b).container,
    hostPort: (b) => get(b).host,
    stop,
  };
}

/** A container's run state, as `podman container inspect` gives it. */
export interface RunState {
  status: string;
  /** Podman's restart count (its own restarts by policy; 0 when the agent restarts). */
  restarts: number;
  pid: number;
  /** The last start and the last exit, Unix ms. */
  started: number;
  finished: number;
}

export async function inspectState(name: string): Promise<RunState> {
  const { stdout } = await podman([
    "container",
    "inspect",
    name,
    "--format",
    "{{.State.Status}} {{.RestartCount}} {{.State.Pid}} {{.State.StartedAt.UnixMilli}} {{.State.FinishedAt.UnixMilli}}",
  ]);
  const [status, restarts, pid, started, finished] = stdout.trim().split(" ");
  return {
    status: status!,
    restarts: Number(restarts),
    pid: Number(pid),
    started: Number(started),
    finished: Number(finished),
  };
}

/**
 * SIGKILLs the app's process (the children of the container's init `pid`), as a crash would end
 * it. Waits for the init to have started it: an empty children list read as pid 0 once, and
 * process.kill(0) signals the caller's own process group (the whole test run).
 */
export async function killAppProcess(pid: number): Promise<void> {
  if (!Number.isInteger(pid) || pid <= 1)
    throw new Error(`no container init to kill the app under (pid ${pid})`);
  const children = await pollUntil(
    () => {
      const listed = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/);
      const pids = listed.map(Number).filter((n) => Number.isInteger(n) && n > 1);
      return pids.length > 0 ? pids : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 50, what: `the app's process under the container's init ${pid}` },
  );
  for (const child of children) process.kill(child, "SIGKILL");
}

/**
 * Kills the app's process from the host and waits up to `timeoutMs` for the agent to start its
 * container again (podman runs it with no restart policy: agent deploy/start-step.ts).
 */
export async function killApp(name: string, timeoutMs = 30_000): Promise<void> {
  const before = await inspectState(name);
  await killAppProcess(before.pid);
  await pollUntil(
    async () => {
      const now = await inspectState(name);
      return now.status === "running" && now.started > before.started ? true : undefined;
    },
    { timeoutMs, intervalMs: 100, what: `${name} started again by the agent` },
  );
}
