// The control plane's systemd unit (deploy/systemd/relayctl-server@.service), one
// instance per role, checked with `systemd-analyze verify`: it exits 0 even on an
// unknown key or a bad value, so any output at all is a failure. This machine
// runs no systemd as PID 1, so the sandbox itself cannot be started here.
import { copyFileSync, cpSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { parse } from "yaml";
import { run } from "@relayctl/devkit";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { REPO_ROOT } from "./harness/programs";

test.after.always(cleanupAll);

const UNIT = join(REPO_ROOT, "deploy/systemd/relayctl-server@.service");
const GATEWAY_DROP_IN = join(REPO_ROOT, "deploy/systemd/relayctl-server@gateway.service.d");

for (const role of ["api", "gateway", "all"]) {
  test(`systemd unit - relayctl-server@${role} passes systemd-analyze verify without a word`, async (t) => {
    const dir = makeTempDir("units");
    const file = join(dir, `relayctl-server@${role}.service`);
    copyFileSync(UNIT, file);
    const { stdout, stderr } = await run("systemd-analyze", ["verify", file], { timeoutMs: 30_000 });
    t.is(`${stdout}${stderr}`.trim(), "");
  });
}

test("systemd unit - runs the built serve with the instance's role, hardened", (t) => {
  const unit = readFileSync(UNIT, "utf8");
  const exec =
    /^ExecStart=\/usr\/bin\/env RELAYCTL_ROLE=%i \/usr\/bin\/node \/opt\/relayctl\/(\S+) serve$/m.exec(unit);
  t.truthy(exec, "ExecStart sets the role from the instance name");
  t.true(existsSync(join(REPO_ROOT, exec![1]!)), `${exec![1]} is what the build makes`);
  for (const line of [
    "NoNewPrivileges=yes",
    "CapabilityBoundingSet=",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
    "SystemCallFilter=@system-service",
  ])
    t.true(unit.split("\n").includes(line), line);
  t.false(/^MemoryDenyWriteExecute=yes/m.test(unit), "V8's JIT needs W+X memory");
});

test("systemd unit - the gateway's drop-in passes systemd-analyze verify without a word", async (t) => {
  const dir = makeTempDir("units");
  const file = join(dir, "relayctl-server@gateway.service");
  copyFileSync(UNIT, file);
  cpSync(GATEWAY_DROP_IN, `${file}.d`, { recursive: true });
  // Given the unit's path, verify reads the drop-ins beside it (an unknown key there is a word).
  const { stdout, stderr } = await run("systemd-analyze", ["verify", file], { timeoutMs: 30_000 });
  t.is(`${stdout}${stderr}`.trim(), "");
});

// Young generation at its largest while a process makes short-lived garbage (new_space's size is
// its two semi-spaces): Node 24 grows it to 128 MiB unbounded.
const CHURN = `const v8 = require("node:v8"); let keep = []; let max = 0;
for (let i = 0; i < 3e6; i++) {
  keep.push({ i, s: "x" + i }); if (keep.length > 200000) keep = [];
  if (i % 50000 === 0) max = Math.max(max, v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space").space_size);
}
console.log(max);`;

test("gateway launch - the unit's drop-in and compose.yaml bound its young generation, and Node takes it from NODE_OPTIONS", async (t) => {
  const dropIn = readFileSync(join(GATEWAY_DROP_IN, "young-generation.conf"), "utf8");
  const flags = /^Environment=NODE_OPTIONS=(.+)$/m.exec(dropIn)?.[1];
  t.is(flags, "--max-semi-space-size=8");
  const compose = parse(readFileSync(join(REPO_ROOT, "deploy/compose.yaml"), "utf8"), { merge: true });
  t.is(compose.services.gateway.environment.NODE_OPTIONS, flags, "compose's gateway starts as the unit does");
  const { stdout } = await run(process.execPath, ["-e", CHURN], {
    timeoutMs: 60_000,
    env: { ...process.env, NODE_OPTIONS: flags },
  });
  // Two 8-MiB semi-spaces, plus pages V8 may hold beside them for a while (256 KiB each: seen 16 MiB
  // + 256 or 512 KiB, once 19.5 MiB, in CI and 30 runs here); unbounded, this churn takes it to 128 MiB.
  t.true(Number(stdout) <= 24 * 1024 ** 2, `new space ${stdout.trim()} bytes`);
});
