// The control plane's systemd unit (deploy/systemd/relayctl-server@.service), one
// instance per role, checked with `systemd-analyze verify`: it exits 0 even on an
// unknown key or a bad value, so any output at all is a failure. This machine
// runs no systemd as PID 1, so the sandbox itself cannot be started here.
import { copyFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { run } from "@relayctl/devkit";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { REPO_ROOT } from "./harness/programs";

test.after.always(cleanupAll);

const UNIT = join(REPO_ROOT, "deploy/systemd/relayctl-server@.service");

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
