import test from "ava";
import { silentLogger } from "../log.js";
import { decide, logMessage, unusableReason } from "./choice.js";
import { EngineMonitor } from "./engine-monitor.js";
import type { EngineName, EngineProbe, Probe } from "./probe.js";

const NO_DAEMON =
  "`docker info` exited with code 1: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?";

const works = (name: EngineName, version: string): EngineProbe => ({
  name,
  cli: true,
  ok: true,
  version,
  reason: "",
});
const broken = (name: EngineName, reason: string): EngineProbe => ({
  name,
  cli: true,
  ok: false,
  version: "",
  reason,
});
const absent = (name: EngineName): EngineProbe => ({
  name,
  cli: false,
  ok: false,
  version: "",
  reason: `no ${name} on PATH`,
});

/** A machine: what each engine's probe finds, and which were asked. */
function machine(found: Partial<Record<EngineName, EngineProbe>>) {
  const asked: EngineName[] = [];
  const probe: Probe = async (name) => {
    asked.push(name);
    return found[name] ?? absent(name);
  };
  return { probe, asked };
}

test("engine choice - auto keeps docker first when its daemon answers, and does not ask podman", async (t) => {
  const m = machine({ docker: works("docker", "27.3.1"), podman: works("podman", "4.3.1") });
  const d = await decide("auto", m.probe);
  t.is(d.working, "docker");
  t.like(d.status, { name: "docker", version: "27.3.1", ok: true, detail: "chosen by auto" });
  t.deepEqual(m.asked, ["docker"]);
});

test("engine choice - auto skips a docker CLI whose daemon does not answer and picks podman", async (t) => {
  const m = machine({ docker: broken("docker", NO_DAEMON), podman: works("podman", "4.3.1") });
  const d = await decide("auto", m.probe);
  t.is(d.working, "podman");
  t.is(d.cli, "podman");
  t.like(d.status, { name: "podman", version: "4.3.1", ok: true });
  t.true(d.status.detail.includes(`docker skipped (${NO_DAEMON})`), d.status.detail);
  t.is(logMessage(d), `container engine: podman 4.3.1 (docker skipped: ${NO_DAEMON})`);
});

test("engine choice - auto with none working names each reason and the fix; login keeps docker's CLI", async (t) => {
  const m = machine({ docker: broken("docker", NO_DAEMON) });
  const d = await decide("auto", m.probe);
  t.is(d.working, undefined);
  t.is(d.cli, "docker", "docker logs in to a registry without a daemon");
  t.like(d.status, { name: "", version: "", ok: false });
  t.true(d.status.detail.startsWith(`docker: ${NO_DAEMON}; podman: no podman on PATH. Fix: install podman`));
  t.regex(unusableReason(d), /^no container engine works: docker: .*Fix: install podman and runc/);
  const lines = logMessage(d).split("\n");
  t.is(lines.length, 4);
  t.is(lines[1], `  docker: ${NO_DAEMON}`);
  t.is(lines[2], "  podman: no podman on PATH");
  t.regex(lines[3]!, /^ {2}fix: install podman and runc .* or start the docker daemon/);
});

test("engine choice - an explicit engine is checked and reported, never replaced", async (t) => {
  const m = machine({ docker: broken("docker", NO_DAEMON), podman: works("podman", "4.3.1") });
  const d = await decide("docker", m.probe);
  t.deepEqual(m.asked, ["docker"], "podman is not asked: the setting is docker");
  t.is(d.working, undefined);
  t.is(d.cli, "docker");
  t.like(d.status, { name: "docker", ok: false });
  t.regex(d.status.detail, /^docker: `docker info` exited with code 1: .* Fix: start the docker daemon/);
  t.regex(unusableReason(d), /^container engine docker does not work: /);
  const ok = await decide("podman", m.probe);
  t.like(ok.status, {
    name: "podman",
    version: "4.3.1",
    ok: true,
    detail: "set by RELAYCTL_AGENT_CONTAINER_ENGINE",
  });
});

test("engine choice - nothing installed leaves no CLI for login either", async (t) => {
  const d = await decide("auto", machine({}).probe);
  t.is(d.cli, undefined);
  t.is(d.working, undefined);
});

test("engine choice - a probe that throws counts as not working", async (t) => {
  const d = await decide("auto", async (name) => {
    if (name === "docker") throw new Error("boom");
    return works("podman", "5.0.0");
  });
  t.is(d.working, "podman");
});

test("engine monitor - a job finding no engine probes again, so one started later is used without a restart", async (t) => {
  const found: Partial<Record<EngineName, EngineProbe>> = { docker: broken("docker", NO_DAEMON) };
  let probes = 0;
  const changes: unknown[] = [];
  const monitor = new EngineMonitor({
    setting: "auto",
    log: silentLogger(),
    recheckMs: 0,
    probe: async (name) => {
      probes++;
      return found[name] ?? absent(name);
    },
  });
  monitor.on("change", (s) => changes.push(s));
  t.is(monitor.current, undefined, "nothing probed before it is needed");
  const first = await monitor.forJob();
  t.is(first.working, undefined);
  t.is(probes, 2);
  // Asked again at once: the last probe is too recent to repeat (bursts of jobs).
  t.is(await monitor.forJob(), first);
  t.is(probes, 2);
  // The docker daemon starts; the next job after the throttle sees it.
  found.docker = works("docker", "27.3.1");
  const later = await monitor.recheck();
  t.is(later.working, "docker");
  t.is(monitor.now().name, "docker");
  t.deepEqual(
    changes.map((c) => (c as { ok: boolean }).ok),
    [false, true],
    "each change is emitted once",
  );
  await monitor.recheck();
  t.is(changes.length, 2, "an unchanged decision is not emitted again");
});

test("engine monitor - concurrent jobs share one probe", async (t) => {
  let probes = 0;
  const monitor = new EngineMonitor({
    setting: "podman",
    log: silentLogger(),
    probe: async (name) => {
      probes++;
      await new Promise((r) => setImmediate(r));
      return works(name, "4.3.1");
    },
  });
  const all = await Promise.all([monitor.forJob(), monitor.forJob(), monitor.forJob()]);
  t.is(probes, 1);
  t.true(all.every((d) => d === all[0]));
});
