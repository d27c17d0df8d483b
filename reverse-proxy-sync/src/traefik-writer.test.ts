// TraefikWriter at the file level: Traefik is not installable on these
// machines, so the contract checked is the one its file provider reads: one
// YAML document per application, replaced whole, parsed back here with `yaml`.
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { parse } from "yaml";
import { cleanupAll, makeTempDir } from "../../test/harness/cleanup";
import { TraefikWriter, fqdnsOfRule } from "./traefik-writer.js";

test.after.always(cleanupAll);

const route = (fqdns: string[], port: number, applicationId = randomUUID()) => ({
  applicationId,
  fqdns: [...fqdns].sort(),
  upstream: `127.0.0.1:${port}`,
});

function setup(entryPoints?: string[]) {
  const dir = makeTempDir("traefik");
  const writer = new TraefikWriter({ dir, entryPoints });
  const yaml = (id: string) => parse(readFileSync(join(dir, `relayctl-${id}.yml`), "utf8"));
  return { dir, writer, yaml };
}

test("traefik - one YAML file per application with a router and a load-balanced service", async (t) => {
  const { dir, writer, yaml } = setup();
  const r = route(["shop.example.test", "*.shop.example.test"], 3000);
  await writer.apply({ upsert: [r], remove: [] });
  const name = `relayctl-${r.applicationId}`;
  t.deepEqual(yaml(r.applicationId), {
    http: {
      routers: {
        [name]: {
          rule: "HostRegexp(`^[a-z0-9-]+\\.shop\\.example\\.test$`) || Host(`shop.example.test`)",
          service: name,
          entryPoints: ["web"],
        },
      },
      services: { [name]: { loadBalancer: { servers: [{ url: "http://127.0.0.1:3000" }] } } },
    },
  });
  t.deepEqual(readdirSync(dir), [`${name}.yml`], "no temp file left behind");
  t.deepEqual(await writer.readAll(), new Map([[r.applicationId, { ...r, pristine: true }]]));
});

test("traefik - the wildcard regexp matches one label of the domain, and only that", (t) => {
  const { writer } = setup();
  const doc = parse(writer.render(route(["*.example.test"], 80, "0b9c1f4e-3d2a-4c5b-8e6f-7a8b9c0d1e2f")));
  const rule: string = doc.http.routers["relayctl-0b9c1f4e-3d2a-4c5b-8e6f-7a8b9c0d1e2f"].rule;
  const source = /^HostRegexp\(`(.*)`\)$/.exec(rule)?.[1] ?? "";
  const re = new RegExp(source);
  t.true(re.test("api.example.test"));
  t.false(re.test("a.b.example.test"));
  t.false(re.test("apixexample.test"));
  t.false(re.test("example.test"));
  t.deepEqual(fqdnsOfRule(rule), ["*.example.test"]);
});

test("traefik - entry points come from the options; a changed port replaces the file", async (t) => {
  const { writer, yaml } = setup(["websecure", "web"]);
  const r = route(["a.example.test"], 3000);
  await writer.apply({ upsert: [r], remove: [] });
  await writer.apply({ upsert: [{ ...r, upstream: "127.0.0.1:3001" }], remove: [] });
  const doc = yaml(r.applicationId);
  const name = `relayctl-${r.applicationId}`;
  t.deepEqual(doc.http.routers[name].entryPoints, ["websecure", "web"]);
  t.deepEqual(doc.http.services[name].loadBalancer.servers, [{ url: "http://127.0.0.1:3001" }]);
});

test("traefik - removal deletes the file; unknown ids and other files are left alone", async (t) => {
  const { dir, writer } = setup();
  const a = route(["a.example.test"], 3000);
  const b = route(["b.example.test"], 3001);
  writeFileSync(join(dir, "operator.yml"), "http: {}\n");
  await writer.apply({ upsert: [a, b], remove: [] });
  await writer.apply({ upsert: [], remove: [a.applicationId, randomUUID(), "x/../operator"] });
  t.deepEqual(readdirSync(dir).sort(), ["operator.yml", `relayctl-${b.applicationId}.yml`]);
  t.deepEqual([...(await writer.readAll()).keys()], [b.applicationId]);
});

test("traefik - an edited or unparsable file is read back as not pristine", async (t) => {
  const { dir, writer } = setup();
  const a = route(["a.example.test"], 3000);
  const b = route(["b.example.test"], 3001);
  await writer.apply({ upsert: [a, b], remove: [] });
  const fileA = join(dir, `relayctl-${a.applicationId}.yml`);
  writeFileSync(fileA, readFileSync(fileA, "utf8").replace("- web", "- web\n        - admin"));
  writeFileSync(join(dir, `relayctl-${b.applicationId}.yml`), "http: [unclosed\n");
  const live = await writer.readAll();
  t.deepEqual(live.get(a.applicationId), { ...a, pristine: false });
  t.deepEqual(live.get(b.applicationId), {
    applicationId: b.applicationId,
    fqdns: [],
    upstream: "",
    pristine: false,
  });
});

test("traefik - a failed apply puts back the files it had already replaced", async (t) => {
  const { dir, writer } = setup();
  const a = route(["a.example.test"], 3000);
  await writer.apply({ upsert: [a], remove: [] });
  const fileA = join(dir, `relayctl-${a.applicationId}.yml`);
  const before = readFileSync(fileA, "utf8");
  // A directory where the second file should go: that write fails after the first one was done.
  const b = route(["b.example.test"], 3001);
  mkdirSync(join(dir, `relayctl-${b.applicationId}.yml`));
  await t.throwsAsync(writer.apply({ upsert: [{ ...a, upstream: "127.0.0.1:4000" }, b], remove: [] }), {
    code: "EISDIR",
  });
  t.is(readFileSync(fileA, "utf8"), before);
  t.false(readdirSync(dir).some((f) => f.endsWith(".tmp")));
});
