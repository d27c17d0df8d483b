import test from "ava";
import { runCall } from "./cli-args.js";
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

test("engine run args - every variable goes through the env file, no value or name on argv", (t) => {
  const call = runCall(
    spec({ DATABASE_URL: SECRET, PATH: "/app/bin", HTTP_PROXY: "http://127.0.0.1:9" }),
    "/dev/shm/d/env",
  );
  t.false(JSON.stringify(call.args).includes(SECRET));
  t.false(JSON.stringify(call.args).includes("/app/bin"));
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
    "--env-file",
    "/dev/shm/d/env",
    "relayctl/app:0123456789ab",
  ]);
  t.is(call.envFile, `DATABASE_URL=${SECRET}\nHTTP_PROXY=http://127.0.0.1:9\nPATH=/app/bin\n`);
  t.false("env" in call, "nothing for the engine CLI's own environment");
});

test("engine run args - no env, no env file", (t) => {
  const call = runCall(spec({}), "/unused");
  t.is(call.envFile, undefined);
  t.false(call.args.includes("--env-file"));
});

test("engine run args - a name that could carry a value, or a value of two lines, is refused", (t) => {
  t.throws(() => runCall(spec({ [`A=${SECRET}`]: "x" }), ""), {
    message: /invalid environment variable name/,
  });
  t.throws(() => runCall(spec({ "-e": "x" }), ""), { message: /invalid environment variable name/ });
  t.throws(() => runCall(spec({ PATH: "a\nB=c" }), ""), { message: /PATH must be one line/ });
  t.throws(() => runCall(spec({ CERT: "line1\r\nline2" }), ""), { message: /CERT must be one line/ });
});

test("engine run args - a preview's limits are --memory in bytes and --cpus from thousandths; none without", (t) => {
  const limited = runCall({ ...spec({}), memoryBytes: 64 * 1024 * 1024, cpuMillis: 500 }, "/dev/shm/d/env");
  const at = limited.args.indexOf("--memory");
  t.deepEqual(limited.args.slice(at, at + 4), ["--memory", "67108864b", "--cpus", "0.500"]);
  t.false(runCall(spec({}), "/dev/shm/d/env").args.some((a) => a === "--memory" || a === "--cpus"));
});
