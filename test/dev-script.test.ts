// `make dev` itself (scripts/dev.mjs --once): first run creates the dev tenant,
// key and local agent and runs a command through the API; the second run reuses
// the same state instead of creating new ones.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { freePort } from "./harness/ports";
import { REPO_ROOT } from "./harness/programs";

test.after.always(cleanupAll);

async function devOnce(dir: string, apiPort: number, gatewayPort: number) {
  return new Promise<{ code: number; out: string }>((resolve) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, "scripts/dev.mjs"), "--once"],
      {
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          RELAYCTL_DEV_DIR: dir,
          RELAYCTL_DEV_PORT: String(apiPort),
          RELAYCTL_DEV_GATEWAY_PORT: String(gatewayPort),
        },
        timeout: 120_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, out: `${stdout}${stderr}` }),
    );
  });
}

test("make dev - the smoke run works from nothing and the second run reuses the same key and server", async (t) => {
  const dir = makeTempDir("devscript");
  const [apiPort, gatewayPort] = [await freePort(), await freePort()];
  const first = await devOnce(dir, apiPort, gatewayPort);
  t.is(first.code, 0, first.out);
  t.regex(first.out, /smoke check passed/);
  t.regex(first.out, /first run/);
  const dev1 = JSON.parse(readFileSync(join(dir, "dev.json"), "utf8"));
  t.is(dev1.base_url, `http://127.0.0.1:${apiPort}`);
  t.regex(dev1.automation_key, /^rca_/);
  t.is(dev1.server_name, "local");

  const second = await devOnce(dir, apiPort, gatewayPort);
  t.is(second.code, 0, second.out);
  t.regex(second.out, /smoke check passed/);
  t.notRegex(second.out, /first run/);
  const dev2 = JSON.parse(readFileSync(join(dir, "dev.json"), "utf8"));
  t.is(dev2.automation_key, dev1.automation_key);
  t.is(dev2.server_id, dev1.server_id);
});
