import test from "ava";
import {
  type DesiredRoute,
  normalizeFqdn,
  renderRoute,
  routeProblem,
  routeSignature,
  sameRoute,
  validFqdn,
} from "./route.js";
import { renderedProblem } from "./writer-support.js";

const route: DesiredRoute = {
  applicationId: "0b9c1f4e-3d2a-4c5b-8e6f-7a8b9c0d1e2f",
  containerName: "shop-1",
  containerPort: 3000,
  imageTag: "shop:7",
  fqdns: ["www.example.com", "example.com"],
};

test("validFqdn - accepts host names and one leading wildcard label", (t) => {
  for (const name of [
    "example.com",
    "a-b.example.co.uk",
    "*.example.com",
    "x1.example.io",
    "xn--bcher-kva.ch",
  ]) {
    t.true(validFqdn(name), name);
  }
});

test("validFqdn - refuses what would break a proxy config or is not a domain", (t) => {
  const bad = [
    "",
    "localhost",
    "Example.com",
    "a..example.com",
    "-a.example.com",
    "a-.example.com",
    "*.*.example.com",
    "a.*.example.com",
    "*example.com",
    "example.com;",
    "example.com; include /etc/passwd",
    "a example.com",
    "example.com\nserver",
    "a`.example.com",
    "127.0.0.1",
    `${"a".repeat(64)}.example.com`,
    `${"a.".repeat(127)}com`,
  ];
  for (const name of bad) t.false(validFqdn(name), JSON.stringify(name));
});

test("normalizeFqdn - lower case, trimmed, without the root dot", (t) => {
  t.is(normalizeFqdn("  WWW.Example.COM. "), "www.example.com");
});

test("routeProblem - names the first problem, undefined for a good route", (t) => {
  t.is(routeProblem(route), undefined);
  t.is(routeProblem({ ...route, applicationId: "x" }), "invalid application id");
  t.regex(routeProblem({ ...route, containerName: "-bad" }) ?? "", /container name/);
  t.regex(routeProblem({ ...route, containerPort: 70000 }) ?? "", /port 70000/);
  t.regex(routeProblem({ ...route, fqdns: [] }) ?? "", /no bound domain/);
  t.is(
    routeProblem({ ...route, fqdns: ["ok.example.com", "bad;.example.com"] }),
    "invalid domain name 'bad;.example.com'",
  );
});

test("routeSignature - sha256 of the canonical route, independent of FQDN order", (t) => {
  const sig = routeSignature(route, "host");
  t.regex(sig, /^sha256:[0-9a-f]{64}$/);
  t.is(routeSignature({ ...route, fqdns: ["example.com", "www.example.com", "example.com"] }, "host"), sig);
});

test("routeSignature - changes with every part of the desired route and with the upstream mode", (t) => {
  const sig = routeSignature(route, "host");
  const variants = [
    routeSignature({ ...route, containerPort: 3001 }, "host"),
    routeSignature({ ...route, imageTag: "shop:8" }, "host"),
    routeSignature({ ...route, containerName: "shop-2" }, "container-network"),
    routeSignature({ ...route, fqdns: ["example.com"] }, "host"),
    routeSignature(route, "container-network"),
  ];
  t.is(new Set([sig, ...variants]).size, variants.length + 1);
});

test("renderRoute - sorted unique domains and the upstream of the mode", (t) => {
  t.deepEqual(renderRoute({ ...route, fqdns: ["b.example.com", "a.example.com", "b.example.com"] }, "host"), {
    applicationId: route.applicationId,
    fqdns: ["a.example.com", "b.example.com"],
    upstream: "127.0.0.1:3000",
  });
  t.is(renderRoute(route, "container-network").upstream, "shop-1:3000");
  t.true(sameRoute(renderRoute(route, "host"), renderRoute({ ...route, imageTag: "other" }, "host")));
  t.false(sameRoute(renderRoute(route, "host"), renderRoute(route, "container-network")));
});

test("renderedProblem - a writer refuses injected domains and upstreams", (t) => {
  const ok = renderRoute(route, "host");
  t.is(renderedProblem(ok), undefined);
  t.regex(renderedProblem({ ...ok, fqdns: ["a.example.com;\n}"] }) ?? "", /invalid domain/);
  t.regex(renderedProblem({ ...ok, upstream: "127.0.0.1:80; include /x" }) ?? "", /invalid upstream/);
  t.regex(renderedProblem({ ...ok, upstream: "127.0.0.1:99999" }) ?? "", /invalid upstream/);
  t.regex(renderedProblem({ ...ok, applicationId: "../../etc" }) ?? "", /application id/);
});

test("upstream - the agent's resolved upstream replaces the mode's default and is validated", (t) => {
  const resolved = { ...route, upstream: "127.0.0.1:41999" };
  t.is(renderRoute(resolved, "host").upstream, "127.0.0.1:41999");
  t.not(
    routeSignature(resolved, "host"),
    routeSignature(route, "host"),
    "a new host port is a new signature",
  );
  t.is(routeSignature({ ...route, upstream: "127.0.0.1:3000" }, "host"), routeSignature(route, "host"));
  t.is(routeProblem(resolved), undefined);
  for (const bad of [
    "127.0.0.1:0",
    "127.0.0.1:70000",
    "a b:80",
    "x:80; include /etc/passwd",
    "[::1]:80",
    ":80",
  ]) {
    t.is(routeProblem({ ...route, upstream: bad }), `invalid upstream '${bad}'`, bad);
  }
});
