import test from "ava";
import { parseInspect } from "../engine/container-facts.js";
import { portVerdict } from "./port-check.js";

// Shapes as the engines print them (trimmed): podman 4.3 lists exposed ports only
// as NetworkSettings.Ports keys with null; docker also in Config.ExposedPorts and
// prefixes names with "/".
const podman = JSON.stringify([
  {
    Name: "web-1",
    State: { Status: "running", Running: true },
    HostConfig: { NetworkMode: "bridge" },
    NetworkSettings: {
      Ports: { "8080/tcp": [{ HostIp: "127.0.0.1", HostPort: "41999" }], "9090/tcp": null },
    },
  },
]);
const docker = JSON.stringify([
  {
    Name: "/api",
    State: { Status: "running", Running: true },
    Config: { ExposedPorts: { "3000/tcp": {}, "53/udp": {} } },
    HostConfig: { NetworkMode: "default" },
    NetworkSettings: {
      Ports: {
        "3000/tcp": [
          { HostIp: "0.0.0.0", HostPort: "3001" },
          { HostIp: "::", HostPort: "3001" },
        ],
      },
    },
  },
]);

const facts = (json: string) => {
  const [f] = parseInspect(json).values();
  if (!f) throw new Error("no facts");
  return f;
};

test("port check - host mode: the container's port routes to the host port it is published on", (t) => {
  t.deepEqual(portVerdict(facts(podman), "web-1", 8080, "host"), { upstream: "127.0.0.1:41999" });
  t.deepEqual(portVerdict(facts(docker), "api", 3000, "host"), { upstream: "127.0.0.1:3001" });
});

test("port check - host mode: a host port the container publishes routes to itself (what the action sends)", (t) => {
  t.deepEqual(portVerdict(facts(podman), "web-1", 41999, "host"), { upstream: "127.0.0.1:41999" });
  t.deepEqual(portVerdict(facts(docker), "api", 3001, "host"), { upstream: "127.0.0.1:3001" });
});

test("port check - host mode: a port the container does not publish is refused, naming its ports", (t) => {
  const v = portVerdict(facts(podman), "web-1", 8443, "host");
  t.deepEqual(v, {
    error:
      "container 'web-1' does not publish port 8443 on the host (its ports: 8080/tcp → 127.0.0.1:41999; 9090/tcp)",
  });
  // Exposed but not published: not reachable from a proxy on the host.
  t.true("error" in portVerdict(facts(podman), "web-1", 9090, "host"));
  // UDP only.
  t.true("error" in portVerdict(facts(docker), "api", 53, "host"));
});

test("port check - container-network mode: exposed or published container ports only", (t) => {
  t.deepEqual(portVerdict(facts(podman), "web-1", 9090, "container-network"), { upstream: "web-1:9090" });
  t.deepEqual(portVerdict(facts(docker), "api", 3000, "container-network"), { upstream: "api:3000" });
  const v = portVerdict(facts(docker), "api", 3001, "container-network");
  t.regex("error" in v ? v.error : "", /container 'api' does not expose port 3001/);
});

test("port check - a stopped container, another name (id prefix) and the host network", (t) => {
  const stopped = facts(podman.replace('"Running":true', '"Running":false').replace('"running"', '"exited"'));
  t.deepEqual(portVerdict(stopped, "web-1", 8080, "host"), {
    error: "container 'web-1' is not running (exited)",
  });
  t.deepEqual(portVerdict(facts(podman), "74211303f7", 8080, "host"), {
    error: "no container is named '74211303f7' on this server",
  });
  const hostNet = facts(docker.replace('"default"', '"host"'));
  t.deepEqual(portVerdict(hostNet, "api", 3000, "host"), { upstream: "127.0.0.1:3000" });
  t.regex(
    JSON.stringify(portVerdict(hostNet, "api", 3001, "host")),
    /host network and does not expose port 3001/,
  );
});

test("port check - one inspect answer holds every container found, by name", (t) => {
  const both = JSON.stringify([...JSON.parse(podman), ...JSON.parse(docker)]);
  t.deepEqual([...parseInspect(both).keys()], ["web-1", "api"]);
  for (const out of ["", "[]", "{}", "not json", '[{"Id":"x"}]']) t.is(parseInspect(out).size, 0, out);
});
