import test from "ava";
import { engineSocketPath } from "./engine-api.js";

test("engine socket - DOCKER_HOST / CONTAINER_HOST naming a unix socket win", (t) => {
  t.is(engineSocketPath("docker", { DOCKER_HOST: "unix:///srv/d.sock" }, 1000), "/srv/d.sock");
  t.is(engineSocketPath("podman", { CONTAINER_HOST: "unix:///srv/p.sock" }, 1000), "/srv/p.sock");
  t.is(engineSocketPath("podman", { DOCKER_HOST: "unix:///srv/d.sock" }, 0), "/srv/d.sock");
  // docker's CLI does not read CONTAINER_HOST.
  t.is(engineSocketPath("docker", { CONTAINER_HOST: "unix:///srv/p.sock" }, 0), "/var/run/docker.sock");
});

test("engine socket - an engine reached over tcp or ssh has no socket here: the CLI answers", (t) => {
  t.is(engineSocketPath("docker", { DOCKER_HOST: "tcp://10.0.0.2:2376" }, 0), undefined);
  t.is(
    engineSocketPath("podman", { CONTAINER_HOST: "ssh://core@host/run/podman/podman.sock" }, 0),
    undefined,
  );
});

test("engine socket - the engines' default sockets", (t) => {
  t.is(engineSocketPath("docker", {}, 1000), "/var/run/docker.sock");
  t.is(engineSocketPath("podman", {}, 0), "/run/podman/podman.sock");
  t.is(
    engineSocketPath("podman", { XDG_RUNTIME_DIR: "/run/user/1000" }, 1000),
    "/run/user/1000/podman/podman.sock",
  );
  t.is(engineSocketPath("podman", {}, 1000), undefined);
});
