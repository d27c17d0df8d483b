// make dev's container engine: which one the dev agent gets, the containers.conf podman needs on
// machines like ours, and the sample's local base image. Everything written lives in the dev
// state dir and reaches the agent through its environment only: the machine's own engine
// configuration (/etc/containers, ~/.config/containers) is never touched.
import { execFile } from "node:child_process";
import { accessSync, constants, copyFileSync, openSync, readSync, closeSync, writeFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync";

/** The sample's base (examples/hello/Dockerfile's default BASE). */
export const BASE_IMAGE = "localhost/relayctl/busybox:1";
/** Where a docker machine without a static busybox gets the same base. */
const BASE_FALLBACK = "docker.io/library/busybox:1";
const STATIC_BUSYBOX = "/bin/busybox";
// DESIGN.md Facts: crun fails here on rlimits and hybrid cgroups; runc with no default ulimits runs.
const CONTAINERS_CONF = '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n';
const PROBE_MS = 5_000;
const BUILD_MS = 180_000;

export function onPath(binary) {
  return (process.env.PATH ?? "").split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, binary), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Runs an engine command; resolves { ok, out } (never rejects): probes expect failures. */
function engineRun(binary, args, env, timeout = PROBE_MS) {
  return new Promise((resolve) => {
    execFile(binary, args, { env, timeout }, (err, stdout, stderr) =>
      resolve({ ok: !err, out: `${stdout}${stderr}`.trim() }),
    );
  });
}

/**
 * The engine the dev agent uses, and the env that makes it work. An explicit
 * RELAYCTL_AGENT_CONTAINER_ENGINE is kept as given. Otherwise docker when its daemon answers
 * (`docker info`), else podman: the order of the agent's own `auto`. Dev still names the engine
 * to the agent because it builds the sample's base image into that engine's store before the
 * agent's first deploy, and the two must not pick differently (an older agent's `auto` took any
 * docker CLI on PATH, even one without a daemon).
 *
 * containers.conf is written whenever the engine is podman and runc is installed (no probe):
 * a probe needs an image to run, which cannot be pulled here and is built only later, and
 * costs a container start on every `make dev`; runc is podman's other supported runtime, so
 * the file is harmless where crun would have worked. CONTAINERS_CONF replaces the user's own
 * containers.conf for this agent only (podman 4.3 has no CONTAINERS_CONF_OVERRIDE); a
 * CONTAINERS_CONF already set by the person is kept.
 */
export async function chooseEngine(stateDir) {
  const wanted = process.env.RELAYCTL_AGENT_CONTAINER_ENGINE;
  const env = {};
  let name;
  if (wanted === "docker" || wanted === "podman") name = wanted;
  else if (onPath("docker") && (await engineRun("docker", ["info"], process.env)).ok) name = "docker";
  else if (onPath("podman")) name = "podman";
  else if (onPath("docker")) {
    return {
      name: null,
      env,
      why: "the docker CLI is installed but its daemon does not answer (docker info)",
    };
  } else {
    return { name: null, env, why: "neither podman nor docker is installed" };
  }
  env.RELAYCTL_AGENT_CONTAINER_ENGINE = name;
  if (name === "podman" && onPath("runc") && !process.env.CONTAINERS_CONF) {
    const file = join(stateDir, "containers.conf");
    await writeFileAtomic(file, CONTAINERS_CONF, 0o644);
    env.CONTAINERS_CONF = file;
  }
  return { name, env, why: "" };
}

/** True when the file is an ELF without an interpreter (a static busybox runs FROM scratch). */
function isStaticElf(file) {
  let fd;
  try {
    fd = openSync(file, "r");
    const head = Buffer.alloc(4096);
    const n = readSync(fd, head, 0, head.length, 0);
    const text = head.subarray(0, n).toString("latin1");
    return text.startsWith("\x7fELF") && !/ld-linux|ld-musl|\/lib\/ld|\/lib64\/ld/.test(text);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Makes BASE_IMAGE when the engine lacks it: FROM scratch with the machine's static busybox
 * (busybox-static on Debian; the way test/harness/containers.ts does it), or, without one, a
 * pull of Docker Hub's busybox tagged as BASE_IMAGE (machines that can pull). Returns "" when
 * the image is there, else why it is not.
 */
export async function ensureBaseImage(engine, stateDir, say) {
  const env = { ...process.env, ...engine.env };
  const bin = engine.name;
  if ((await engineRun(bin, ["image", "inspect", BASE_IMAGE], env)).ok) return "";
  if (isStaticElf(STATIC_BUSYBOX)) {
    say(`building the sample's base image ${BASE_IMAGE} with ${bin} (FROM scratch + ${STATIC_BUSYBOX})`);
    const ctx = join(stateDir, "base-image");
    await mkdir(ctx, { recursive: true });
    copyFileSync(STATIC_BUSYBOX, join(ctx, "busybox"));
    writeFileSync(
      join(ctx, "Containerfile"),
      'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n',
    );
    const built = await engineRun(
      bin,
      ["build", "-q", "-t", BASE_IMAGE, "-f", join(ctx, "Containerfile"), ctx],
      env,
      BUILD_MS,
    );
    return built.ok
      ? ""
      : `${bin} build of ${BASE_IMAGE} failed: ${built.out.split("\n").slice(-3).join(" ")}`;
  }
  say(`no static busybox at ${STATIC_BUSYBOX}: pulling ${BASE_FALLBACK} as the sample's base`);
  const pulled = await engineRun(bin, ["pull", "-q", BASE_FALLBACK], env, BUILD_MS);
  if (!pulled.ok)
    return `no ${BASE_IMAGE}: install busybox-static (Debian) or let ${bin} pull ${BASE_FALLBACK} (${pulled.out.split("\n").pop()})`;
  const tagged = await engineRun(bin, ["tag", BASE_FALLBACK, BASE_IMAGE], env);
  return tagged.ok ? "" : `${bin} tag ${BASE_IMAGE} failed: ${tagged.out}`;
}
