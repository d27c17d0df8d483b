import test from "ava";
import { TargetError, composeTargets, serviceListTargets } from "./compose.js";

const compose = `
name: shop
services:
  web:
    image: ghcr.io/acme/web:\${TAG:-dev}
    ports:
      - "8080:3000"
  api:
    image: ghcr.io/acme/api:1.4
    ports:
      - target: 9000
        published: "19000"
        protocol: tcp
  worker:
    build: ./worker
  admin:
    image: acme/admin
    ports:
      - "127.0.0.1:7001:7000/tcp"
      - "7002:7002"
  metrics:
    image: acme/metrics
    expose:
      - "9100"
  dns:
    image: acme/dns
    ports:
      - "53:53/udp"
  ranged:
    image: acme/ranged
    ports:
      - "[::1]:8000-8001:80-81"
`;

test("compose - short and long port syntax give the published host port", (t) => {
  const targets = composeTargets(compose, { TAG: "v7" });
  const byName = Object.fromEntries(targets.map((x) => [x.name, x]));
  t.deepEqual(
    targets.map((x) => x.name),
    ["web", "api", "worker", "admin", "metrics", "dns", "ranged"],
  );
  t.is(byName.web.port, 8080);
  t.is(byName.web.image, "ghcr.io/acme/web:v7");
  t.is(byName.api.port, 19000);
  t.is(byName.admin.port, 7001);
  t.regex(byName.admin.note ?? "", /2 TCP ports; using the first \(7001\)/);
  t.is(byName.metrics.port, 9100, "expose-only services are reached on their exposed port");
  t.is(byName.ranged.port, 8000, "a range maps its first port");
});

test("compose - target choice gives the container port", (t) => {
  const byName = Object.fromEntries(composeTargets(compose, {}, "target").map((x) => [x.name, x]));
  t.is(byName.web.port, 3000);
  t.is(byName.api.port, 9000);
  t.is(byName.admin.port, 7000);
  t.is(byName.ranged.port, 80);
  t.is(byName.web.image, "ghcr.io/acme/web:dev", "the default of an unset variable applies");
});

test("compose - services with no TCP port or no image leave them to the caller", (t) => {
  const byName = Object.fromEntries(composeTargets(compose, {}).map((x) => [x.name, x]));
  t.is(byName.worker.port, undefined);
  t.is(byName.worker.image, undefined);
  t.is(byName.dns.port, undefined);
  t.regex(byName.dns.note ?? "", /non-TCP/);
});

test("compose - a short port without a host part is not published", (t) => {
  const [svc] = composeTargets("services:\n  web:\n    ports: [3000, '4000']\n", {});
  t.is(svc.port, 3000);
});

test("compose - broken files name what is wrong", (t) => {
  t.throws(() => composeTargets("services: [", {}), { instanceOf: TargetError, message: /not valid YAML/ });
  t.throws(() => composeTargets("version: '3'\n", {}), { message: /no 'services' mapping/ });
  t.throws(() => composeTargets("services: {}\n", {}), { message: /defines no services/ });
  t.throws(() => composeTargets("services:\n  web:\n    ports: ['8080:http']\n", {}), {
    message: /services\.web\.ports\[0\]: 'http' is not a port/,
  });
  t.throws(() => composeTargets("services:\n  web:\n    ports: ['70000']\n", {}), { message: /not a port/ });
  t.throws(() => composeTargets("services:\n  web:\n    ports:\n      - published: 80\n", {}), {
    message: /needs 'target'/,
  });
  t.throws(() => composeTargets("services:\n  web:\n    image: x:${TAG:?set TAG}\n", {}), {
    message: /required variable TAG is missing: set TAG/,
  });
});

test("services input - name:port entries, per line or comma-separated", (t) => {
  t.deepEqual(serviceListTargets(["web:3000, api:8080", "", "admin:7000"]), [
    { name: "web", port: 3000 },
    { name: "api", port: 8080 },
    { name: "admin", port: 7000 },
  ]);
  t.throws(() => serviceListTargets(["web"]), { message: /'web' is not a 'name:port' entry/ });
  t.throws(() => serviceListTargets(["web:0"]), { message: /not a port/ });
  t.throws(() => serviceListTargets([" ", ","]), { message: /no 'name:port' entries/ });
});
