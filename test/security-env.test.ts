// Issue 30, finding 13: an application's env reaches its container only, never
// the engine client's own environment. Variables podman reads for itself
// (REGISTRIES_CONFIG_PATH, HTTP_PROXY, OTEL_*, DBUS_SESSION_BUS_ADDRESS), given as
// env_overrides, are the container's and change nothing of what podman does: a
// REGISTRIES_CONFIG_PATH naming a file podman cannot parse made `podman run` fail
// while the values travelled in the CLI's environment. Values stay off argv.
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { podman } from "./harness/containers";
import { type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { assertAbsent, plantSecret } from "./harness/leaks";
import { proxyGet } from "./harness/proxy-client";

let s: DeployStack;
let repo: AppRepo;

test.before(async () => {
  repo = await createAppRepo({ first: "env-1" });
  s = await startDeployStack();
});
test.after.always(cleanupAll);

test.serial(
  "env - the engine client's own variables reach the container and change nothing of the engine",
  async (t) => {
    const badConf = join(makeTempDir("registries"), "registries.conf");
    writeFileSync(badConf, "this is [not toml\n");
    const secret = plantSecret("engineenv");
    const overrides = {
      REGISTRIES_CONFIG_PATH: badConf,
      HTTP_PROXY: "http://127.0.0.1:9",
      HTTPS_PROXY: "http://127.0.0.1:9",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9",
      DBUS_SESSION_BUS_ADDRESS: "unix:path=/nonexistent",
      PATH: "/nowhere:/bin",
      APP_TOKEN: secret,
    };
    const app = await s.createApp({}, repo);
    const d = await s.deployAndWait(app.id, { env_overrides: overrides });
    t.like(d.op.json, { status: "completed", result: { exit_code: 0 } }, describe(d.op));
    t.is((await proxyGet(s.proxyPort, app.fqdn)).body, "version env-1");
    for (const [name, value] of Object.entries(overrides))
      t.is((await proxyGet(s.proxyPort, app.fqdn, `/cgi-bin/env?${name}`)).body, value, name);

    // What podman recorded as the command line that created the container: no value, no name.
    const [name] = await s.containersOf(app.id);
    t.truthy(name);
    const argv = (await podman(["inspect", "--format", "{{json .Config.CreateCommand}}", name!])).stdout;
    t.true(argv.includes("--env-file"), argv);
    assertAbsent(t, argv, [secret, badConf, "127.0.0.1:9", "APP_TOKEN"], `the argv of ${name}`);
    // The env file lived in a private dir removed once podman had read it.
    const file = /"--env-file","([^"]+)"/.exec(argv)?.[1];
    t.truthy(file, argv);
    t.false(existsSync(file!), `${file} is gone`);
  },
);

test.serial(
  "env - a value of two lines is refused at start, naming the variable and not the value",
  async (t) => {
    const app = await s.createApp({}, repo);
    const secret = plantSecret("twolines");
    const d = await s.deployAndWait(app.id, { env_overrides: { CERT: `${secret}\nline2` } });
    t.like(d.op.json, { status: "failed" }, describe(d.op));
    const v = await s.deployment(app.id, d.deploymentId);
    t.like(v.json, { status: "failed", failed_step: "start" }, describe(v));
    t.regex(v.text, /CERT must be one line/);
    assertAbsent(t, v.text + d.op.text, [secret], "the deployment");
  },
);
