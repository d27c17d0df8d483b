import test from "ava";
import { engineOwnVariable, runCall } from "./cli-args.js";
import type { RunSpec } from "./engine.js";

const SECRET = "v@lue-that-must-not-be-on-argv";

const spec = (env: Record<string, string>): RunSpec => ({
  name: "web-1a2b3c4d",
  image: "relayctl/app:0123456789ab",
  labels: { "relayctl.application": "app" },
  containerPort: 8080,
  init: true,
  env,
});

test("engine run args - env names on argv, values only in the CLI's environment", (t) => {
  const call = runCall(spec({ DATABASE_URL: SECRET, API_KEY: `${SECRET}-2` }), "/unused");
  t.false(JSON.stringify(call.args).includes(SECRET));
  t.deepEqual(call.args, [
    "run",
    "-d",
    "--name",
    "web-1a2b3c4d",
    "--label",
    "relayctl.application=app",
    "-p",
    "127.0.0.1::8080",
    "--init",
    "--env",
    "API_KEY",
    "--env",
    "DATABASE_URL",
    "relayctl/app:0123456789ab",
  ]);
  t.deepEqual(call.env, { API_KEY: `${SECRET}-2`, DATABASE_URL: SECRET });
  t.is(call.envFile, undefined);
});

test("engine run args - the engine's own variables go through the env file, not its environment", (t) => {
  const call = runCall(spec({ PATH: "/app/bin", LD_PRELOAD: SECRET, OTHER: "x1" }), "/dev/shm/d/env");
  t.false(JSON.stringify(call.args).includes(SECRET));
  t.false(JSON.stringify(call.args).includes("/app/bin"));
  t.deepEqual(call.env, { OTHER: "x1" }, "PATH and LD_PRELOAD must not change what the CLI runs");
  t.is(call.envFile, `LD_PRELOAD=${SECRET}\nPATH=/app/bin\n`);
  t.deepEqual(call.args.slice(call.args.indexOf("--env-file"), call.args.indexOf("--env-file") + 2), [
    "--env-file",
    "/dev/shm/d/env",
  ]);
  t.true(engineOwnVariable("DOCKER_HOST"));
  t.true(engineOwnVariable("CONTAINERS_CONF"));
  t.false(engineOwnVariable("DATABASE_URL"));
});

test("engine run args - a name that could carry a value, or an own variable of two lines, is refused", (t) => {
  t.throws(() => runCall(spec({ [`A=${SECRET}`]: "x" }), ""), {
    message: /invalid environment variable name/,
  });
  t.throws(() => runCall(spec({ "-e": "x" }), ""), { message: /invalid environment variable name/ });
  t.throws(() => runCall(spec({ PATH: "a\nB=c" }), ""), { message: /PATH must be one line/ });
  t.notThrows(() => runCall(spec({ CERT: "line1\nline2" }), ""), "other variables may span lines");
});
