// `make dev` itself (scripts/dev.mjs): the first run creates the dev tenant, key
// and local agent; dev.json appears only when an exec works (a script that
// waits for the file gets a working exec on its first try, issue 16) and goes
// away when dev stops; the second run reuses the same state instead of creating
// new ones (the smoke run, --once).
import { execFile } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { exec } from "./harness/http";
import { freePort } from "./harness/ports";
import { ManagedProcess } from "./harness/process";
import { REPO_ROOT } from "./harness/programs";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

const dir = makeTempDir("devscript");
const devJson = join(dir, "dev.json");
let ports: [number, number];

const devEnv = () => ({
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  RELAYCTL_DEV_DIR: dir,
  RELAYCTL_DEV_PORT: String(ports[0]),
  RELAYCTL_DEV_GATEWAY_PORT: String(ports[1]),
});

function devOnce() {
  return new Promise<{ code: number; out: string }>((resolve) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, "scripts/dev.mjs"), "--once"],
      { env: devEnv(), timeout: 120_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, out: `${stdout}${stderr}` }),
    );
  });
}

test.before(async () => {
  ports = [await freePort(), await freePort()];
});

let first: Record<string, string>;

test.serial("make dev - a script that waits for dev.json gets a working exec on its first try", async (t) => {
  const dev = new ManagedProcess({
    name: "make-dev",
    command: process.execPath,
    args: [join(REPO_ROOT, "scripts/dev.mjs")],
    env: devEnv(),
    logFile: join(dir, "dev-1.log"),
  });
  t.teardown(() => dev.stop("SIGKILL"));
  // Polled often, and used the moment it appears: no grace period for the agent.
  const text = await pollUntil(() => (existsSync(devJson) ? readFileSync(devJson, "utf8") : undefined), {
    what: "dev.json",
    timeoutMs: 120_000,
    intervalMs: 10,
  });
  first = JSON.parse(text); // written atomically: never a partial file
  const res = await exec(
    { baseUrl: first.base_url!, key: first.automation_key },
    { server_id: first.server_id, command: "echo first-try", timeout_seconds: 30 },
  );
  t.is(res.status, 200, `${describe(res)}\n${dev.tail()}`);
  t.like(res.json, { status: "completed", exit_code: 0, stdout: "first-try\n" });
  t.is(first.base_url, `http://127.0.0.1:${ports[0]}`);
  t.regex(first.automation_key!, /^rca_/);
  t.regex(first.api_key!, /^rck_/);
  t.is(first.server_name, "local");
  t.is(statSync(devJson).mode & 0o777, 0o600);
  t.regex(dev.text(), /first run/);

  const exit = await dev.stop("SIGTERM", 15_000);
  t.is(exit.code, 0, dev.tail());
  t.false(existsSync(devJson), "a stopped dev leaves no dev.json behind");
  t.true(existsSync(join(dir, "state.json")), "the state for the next run stays");
});

test.serial("make dev - the second run reuses the same key and server", async (t) => {
  const second = await devOnce();
  t.is(second.code, 0, second.out);
  t.regex(second.out, /smoke check passed/);
  t.notRegex(second.out, /first run/);
  const state = JSON.parse(readFileSync(join(dir, "state.json"), "utf8"));
  t.is(state.automation_key, first.automation_key);
  t.is(state.server_id, first.server_id);
});
