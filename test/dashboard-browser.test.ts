// The web dashboard in a real browser (issue 15): Debian's chromium, headless,
// against a whole installation that deploys for real (deploy-stack: NATS,
// MariaDB, api, gateway, Caddy, a podman agent). A person signs in on /login,
// creates an automation key with scopes (secret shown once), revokes it and the
// API refuses it; adds a server by running the enroll command the page shows and
// sees it turn connected; creates an application, sets an env variable that never
// comes back, deploys and follows the live log to success; rolls back a release;
// finds a CI run's operations by run_id. Every page passes axe-core (no serious or
// critical violation) and is screenshotted, at laptop and at phone width, where no
// page scrolls sideways; the set is copied to docs/screenshots/ (harness/dashboard-browser.ts).
// API keys, registry credentials, sessions and members: dashboard-browser-settings.test.ts.
// One browser, one stack, tests in order (each builds on the one before).
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import test from "ava";
import { Agent } from "./harness/agent";
import { makeTempDir, onCleanup } from "./harness/cleanup";
import { removeAppContainers, removeAppImages } from "./harness/containers";
import {
  LIVE_MS,
  b,
  checkPage,
  dashboardBrowser,
  open,
  owner,
  page,
  repo,
  row,
  s,
  uniq,
} from "./harness/dashboard-browser";
import { APP_PORT, createAppRepo } from "./harness/git-repo";
import { api } from "./harness/http";
import { AGENT_MAIN } from "./harness/programs";
import { proxyGet } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

const sh = promisify(execFile);
const DEPLOY_MS = 150_000;

dashboardBrowser(test);

test.serial("dashboard - / sends a signed-out person to sign in, and back to /app/ after it", async (t) => {
  await page.goto("/");
  t.regex(page.url(), /\/login\?next=(%2F|\/)app(%2F|\/)$/);
  await checkPage(t, "login");
  await page.getByLabel("E-mail").fill(owner.email);
  await page.getByLabel("Password").fill(owner.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/app\/$/);
  await page.getByRole("heading", { level: 1, name: "Servers" }).waitFor();
  // The cluster's agent is connected: the live state says so.
  await row(s.c.serverName)
    .locator(".badge", { hasText: /^connected$/ })
    .waitFor({ timeout: LIVE_MS });

  await page.goto("/");
  t.regex(page.url(), /\/app\/$/, "signed in, / leads to the dashboard");
  const res = await open("/app/servers", "Servers");
  const headers = res!.headers();
  t.regex(headers["content-security-policy"] ?? "", /script-src 'self'/);
  t.notRegex(headers["content-security-policy"] ?? "", /unsafe-inline/);
  t.is(headers["cache-control"], "no-store");
  const script = await page.locator("script[src^='/app/assets/']").getAttribute("src");
  const asset = await page.request.get(script!);
  t.is(asset.status(), 200);
  t.regex(asset.headers()["cache-control"] ?? "", /max-age=31536000.*immutable/);
  await checkPage(t, "servers");
});

test.serial(
  "dashboard - an automation key with scopes: secret shown once, revoked, then refused",
  async (t) => {
    // The tabs work from the keyboard: the arrow key moves to the other tab.
    await open("/app/keys", "API Keys");
    await page.getByRole("tab", { name: "API Keys" }).focus();
    await page.keyboard.press("ArrowRight");
    await page.waitForURL(/\/app\/keys\/automation$/);
    t.is(await page.getByRole("tab", { selected: true }).textContent(), "Automation Keys");
    const name = uniq("ci-key");
    const form = page.getByRole("form", { name: "New automation key" });
    await form.getByLabel("Name").fill(name);
    await form.getByRole("group", { name: "Operations" }).getByLabel("exec", { exact: true }).check();
    await form.getByRole("group", { name: "Servers" }).getByLabel(s.c.serverName).check();
    await form.getByLabel(/Rate limit/).fill("50");
    await form.getByRole("button", { name: "Create automation key" }).click();
    const secret = await page.getByRole("textbox", { name: "Automation key", exact: true }).inputValue();
    t.regex(secret, /^rca_/);
    // The copy button puts exactly the secret on the clipboard.
    await b.context.grantPermissions(["clipboard-read", "clipboard-write"]);
    await page.getByRole("button", { name: "Copy" }).click();
    await page.getByText("Automation key copied to the clipboard.").waitFor();
    t.is(await page.evaluate("navigator.clipboard.readText()"), secret);
    await checkPage(t, "automation-key-created");

    // The scopes hold: exec on the chosen server runs, an operation outside them is 403.
    const ran = await api(s.c, "/exec", {
      body: { server_id: s.c.serverId, command: "echo scoped" },
      key: secret,
    });
    t.is(ran.status, 200, ran.text);
    const restart = await api(s.c, "/restart", {
      body: { server_id: s.c.serverId, container_name: "nothing" },
      key: secret,
    });
    t.is(restart.status, 403, restart.text);

    // Shown once: after Done and a reload the page holds no trace of it.
    await page.getByRole("button", { name: "Done" }).click();
    await open("/app/keys/automation", "API Keys");
    await row(name).waitFor();
    t.false((await page.content()).includes(secret));
    t.regex((await row(name).textContent()) ?? "", /exec; .*50\/min/);
    await checkPage(t, "automation-keys");

    // Revoking asks first: Escape cancels and the key stays.
    const revoke = row(name).getByRole("button", { name: `Revoke ${name}` });
    const dialog = page.getByRole("dialog");
    await revoke.click();
    await dialog.waitFor();
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "hidden" });
    t.is(await row(name).count(), 1);
    await revoke.focus();
    await page.keyboard.press("Enter");
    await dialog.getByRole("button", { name: "Revoke key" }).click();
    await row(name).waitFor({ state: "detached" });
    const refused = await api(s.c, "/exec", {
      body: { server_id: s.c.serverId, command: "true" },
      key: secret,
    });
    t.is(refused.status, 401, refused.text);
  },
);

/** A `relayctl-agent` on PATH (the built agent), so the page's command runs as shown. */
function agentShim(dir: string): string {
  const bin = join(dir, "bin");
  mkdirSync(bin);
  const shim = join(bin, "relayctl-agent");
  writeFileSync(
    shim,
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(AGENT_MAIN)} "$@"\n`,
  );
  chmodSync(shim, 0o755);
  return bin;
}

test.serial(
  "dashboard - Add server: the shown enroll command enrolls it, and it turns connected",
  async (t) => {
    await open("/app/servers", "Servers");
    await page.getByRole("button", { name: "Add server" }).click();
    const name = uniq("web");
    await page.getByRole("form", { name: "Add a server" }).getByLabel(/Name/).fill(name);
    await page.getByRole("button", { name: "Create join token" }).click();
    const install = await page.getByRole("textbox", { name: "Install command" }).inputValue();
    const enroll = await page.getByRole("textbox", { name: "Enroll command" }).inputValue();
    t.regex(install, /install\.sh .*--token rjt_/);
    t.regex(enroll, /^relayctl-agent enroll .*--token rjt_/);
    await checkPage(t, "add-server");

    const dir = makeTempDir("dash-agent");
    const stateDir = join(dir, "state");
    const env = {
      ...process.env,
      PATH: `${agentShim(dir)}:${process.env.PATH}`,
      RELAYCTL_AGENT_STATE_DIR: stateDir,
    };
    const { stdout } = await sh("sh", ["-c", enroll], { env, timeout: 30_000 });
    t.regex(stdout, new RegExp(name));
    await page.getByRole("button", { name: "Done" }).click();
    // Enrolled, no agent running yet: listed, not connected.
    await row(name).locator(".badge", { hasText: "not connected" }).waitFor({ timeout: LIVE_MS });

    const agent = new Agent(stateDir, dir);
    onCleanup(() => agent.stop());
    await agent.start();
    const connected = row(name).locator(".badge", { hasText: /^connected$/ });
    await connected.waitFor({ timeout: LIVE_MS });
    t.true(await connected.isVisible(), "the server's row says connected once its agent runs");
  },
);

test.serial(
  "dashboard - an application: env value never shown again, deployed with the live log to success",
  async (t) => {
    await open("/app/applications", "Applications");
    await checkPage(t, "applications-empty");
    await page.getByRole("button", { name: "New application" }).click();
    const name = uniq("shop");
    const fqdn = `${name}.dash.test`;
    const form = page.getByRole("form", { name: "New application" });
    await form.getByLabel("Name", { exact: true }).fill(name);
    await form.getByLabel("Server").selectOption({ label: s.c.serverName });
    await form.getByLabel("Container name").fill(name);
    await form.getByLabel("Container port").fill(String(APP_PORT));
    await form.getByLabel(/Domains/).fill(fqdn);
    await form.getByLabel("Git repository URL").fill(repo.path);
    await form.getByRole("group", { name: "Health check" }).getByLabel("Path").fill("/");
    await form.getByRole("button", { name: "Create application" }).click();
    await page.waitForURL(/\/app\/applications\/[0-9a-f-]{36}$/);
    const appId = page.url().split("/").pop()!;
    onCleanup(async () => {
      await removeAppContainers(appId);
      await removeAppImages(appId);
    });
    await page.getByRole("heading", { level: 1, name }).waitFor();

    const value = `v-${randomBytes(12).toString("hex")}`;
    const env = page.getByRole("form", { name: "Set an environment variable" });
    await env.getByLabel("Name").fill("SHOP_TOKEN");
    await env.getByLabel("Value").fill(value);
    await env.getByRole("button", { name: "Set variable" }).click();
    await page
      .getByRole("list", { name: "Environment variables" })
      .getByText("SHOP_TOKEN", { exact: true })
      .waitFor();
    t.is(await env.getByLabel("Value").inputValue(), "", "the value is cleared from the form");
    await checkPage(t, "application");

    await page.getByRole("form", { name: "Deploy" }).getByRole("button", { name: "Deploy" }).click();
    await page.waitForURL(/\/deployments\/[0-9a-f-]{36}$/);
    await page.getByTestId("live-log").waitFor();
    await page
      .getByTestId("deployment-status")
      .getByText(/^(completed|failed|timeout)$/)
      .waitFor({ timeout: DEPLOY_MS });
    const status = await page.getByTestId("deployment-status").textContent();
    const log = (await page.getByTestId("live-log").textContent()) ?? "";
    t.is(status, "completed", log);
    t.regex(
      log,
      /fetching [\s\S]*answered 200/,
      "the live log followed the steps from fetch to the health check",
    );
    await checkPage(t, "deployment");

    // The new version serves, with the variable's value in its environment...
    t.is((await proxyGet(s.proxyPort, fqdn)).body.trim(), "version 1");
    t.is((await proxyGet(s.proxyPort, fqdn, "/cgi-bin/env?SHOP_TOKEN")).body, value);
    // ...and the value is nowhere the browser was given: no response, not the DOM.
    await open(`/app/applications/${appId}`, name);
    await page
      .getByRole("list", { name: "Environment variables" })
      .getByText("SHOP_TOKEN", { exact: true })
      .waitFor();
    t.false((await page.content()).includes(value), "value in the DOM");
    t.deepEqual(
      b.bodies.filter((body) => body.includes(value)),
      [],
      "value in a response",
    );

    // This control plane has no GitHub App: the section tells the owner what turns it on.
    await page.getByText("GitHub repository", { exact: true }).click();
    await page.getByText(/GitHub App is not set up on this control plane/).waitFor();

    // Edit: only what changed is sent, and the API has it.
    await page.getByText("Settings", { exact: true }).click();
    const settings = page.getByRole("form", { name: "Edit application" });
    await settings
      .getByRole("group", { name: "Health check" })
      .getByLabel(/Timeout/)
      .fill("25");
    await settings.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Saved.").waitFor();
    const saved = await s.manage(`/applications/${appId}`);
    t.is(saved.json.health_check_timeout_seconds, 25);
    t.deepEqual(saved.json.fqdns, [fqdn]);
  },
);

test.serial("dashboard - Releases: the live release shown, Roll back starts a kept one again", async (t) => {
  const appRepo = await createAppRepo({ first: "one" });
  const app = await s.createApp({}, appRepo);
  const first = await s.deployAndWait(app.id);
  t.like(first.op.json, { status: "completed" }, JSON.stringify(first.op.json));
  await appRepo.commitVersion("two");
  const second = await s.deployAndWait(app.id);
  t.like(second.op.json, { status: "completed" }, JSON.stringify(second.op.json));

  await open(`/app/applications/${app.id}`, app.name);
  const live = page.getByTestId("application-live-release");
  await live.getByText(appRepo.head().sha.slice(0, 10)).waitFor();
  const releases = page.getByRole("region", { name: "Releases" });
  await releases.getByText("live", { exact: true }).waitFor();
  // The live release has no button; the first has one.
  t.is(await releases.getByRole("button", { name: `Roll back to ${second.deploymentId}` }).count(), 0);
  await releases.getByRole("button", { name: `Roll back to ${first.deploymentId}` }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Roll back" }).click();
  await page.waitForURL(/\/deployments\/[0-9a-f-]{36}$/);
  await page
    .getByTestId("deployment-status")
    .getByText(/^(completed|failed|timeout)$/)
    .waitFor({ timeout: DEPLOY_MS });
  const log = (await page.getByTestId("live-log").textContent()) ?? "";
  t.is(await page.getByTestId("deployment-status").textContent(), "completed", log);
  t.regex(log, /nothing to build/);
  t.is((await proxyGet(s.proxyPort, app.fqdn)).body.trim(), "version one");

  await open(`/app/applications/${app.id}`, app.name);
  await page.getByTestId("application-live-release").getByText("(a rollback)").waitFor();
});

test.serial("dashboard - Activity finds a CI run's operations by run_id, with its context", async (t) => {
  const runId = uniq("gh-run");
  const run_context = { provider: "github", repository: "acme/shop", workflow: "deploy", actor: "ada" };
  for (const command of ["echo built", "sh -c 'exit 3'"]) {
    const res = await api(s.c, "/exec", {
      body: { server_id: s.c.serverId, command, run_id: runId, run_context },
    });
    t.is(res.status, 200, res.text);
  }
  await open("/app/activity", "Activity");
  await page.getByRole("link", { name: runId }).waitFor();
  await checkPage(t, "activity");

  await page.getByLabel("Run id").fill(runId);
  await page.getByRole("button", { name: "Show operations" }).click();
  await page.waitForURL(new RegExp(`run_id=${runId}`));
  const table = page.getByTestId("operations");
  // The run's two operations only (the page listed every operation before the filter).
  await pollUntil(async () => ((await table.locator("tbody tr").count()) === 2 ? true : undefined), {
    what: "the run's two operations",
    timeoutMs: LIVE_MS,
  });
  const text = (await table.textContent()) ?? "";
  t.regex(text, /echo built/);
  t.regex(text, /exit 3/);
  t.regex((await page.locator("main").textContent()) ?? "", /acme\/shop/);
  await checkPage(t, "activity-run");
  // Everything so far, the revoked key and the deployment included, left the audit chain whole.
  await page
    .getByTestId("audit-chain")
    .getByText(/^Audit chain verified: \d+ events/)
    .waitFor();
  // No page of this file logged an error (dashboard-browser-settings' Members test checks its own).
  t.deepEqual(b.consoleErrors, [], "no script error and no CSP refusal in the console");
});
