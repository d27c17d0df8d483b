// The web dashboard in a real browser (issue 15): Debian's chromium, headless,
// against a whole installation that deploys for real (deploy-stack: NATS,
// MariaDB, api, gateway, Caddy, a podman agent). A person signs in on /login,
// creates an automation key with scopes (secret shown once), revokes it and the
// API refuses it; adds a server by running the enroll command the page shows and
// sees it turn connected; creates an application, sets an env variable that never
// comes back, deploys and follows the live log to success; finds a CI run's
// operations by run_id. Every page passes axe-core (no serious or critical
// violation) and is screenshotted, at laptop and at phone width, where no page scrolls
// sideways; the set is copied to docs/screenshots/.
// One browser, one stack, tests in order (each builds on the one before).
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import test, { type ExecutionContext } from "ava";
import type { Page } from "playwright-core";
import { Agent } from "./harness/agent";
import {
  LAPTOP,
  PHONE,
  type Session,
  axeViolations,
  describeViolations,
  launchBrowser,
  publishScreenshots,
  screenshot,
} from "./harness/browser";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { removeAppContainers, removeAppImages } from "./harness/containers";
import { type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { APP_PORT, type AppRepo, createAppRepo } from "./harness/git-repo";
import { api, request } from "./harness/http";
import { type Person, createOwner } from "./harness/people";
import { AGENT_MAIN } from "./harness/programs";
import { proxyGet } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

const sh = promisify(execFile);
const DEPLOY_MS = 150_000;
const LIVE_MS = 20_000;

let s: DeployStack;
let repo: AppRepo;
let owner: Person;
let b: Session;
let page: Page;
let shots: string;
const FAILURES = join(tmpdir(), "relayctl-dashboard-failures");
const uniq = (p: string) => `${p}-${randomBytes(3).toString("hex")}`;

test.before(async () => {
  [repo, s] = await Promise.all([createAppRepo({ first: "1" }), startDeployStack()]);
  owner = await createOwner(s.c.db.url, s.c.tenantId);
  b = await launchBrowser(s.c.baseUrl);
  page = b.page;
  shots = makeTempDir("dashboard-shots");
});
test.after.always(cleanupAll);
let allPassed = true;
// What the page showed when a test failed, kept after the run (temp dirs are not).
test.afterEach.always(async (t) => {
  if (!t.passed) allPassed = false;
  if (!t.passed && page) {
    mkdirSync(FAILURES, { recursive: true });
    const file = join(
      FAILURES,
      `failed-${t.title
        .replace(/^.* hook for /, "")
        .replace(/\W+/g, "-")
        .slice(0, 60)}.png`,
    );
    await page.screenshot({ path: file }).catch(() => undefined);
    t.log(`screenshot of the failure: ${file}`);
  }
});

/** Opens a dashboard path and waits for its page heading. */
async function open(path: string, heading: string) {
  const res = await page.goto(path);
  await page.getByRole("heading", { level: 1, name: heading }).waitFor();
  return res;
}

/**
 * The page as shown, at laptop and at phone width: no serious or critical axe violation,
 * nothing sticking out sideways on the phone, and a screenshot of each (<name>.png, the
 * viewport, and <name>-phone.png, the whole page: the set docs/screenshots/ gets).
 */
async function checkPage(t: ExecutionContext, name: string) {
  await page.locator(".loading").first().waitFor({ state: "detached" });
  for (const [size, shot] of [
    [LAPTOP, name],
    [PHONE, `${name}-phone`],
  ] as const) {
    await page.setViewportSize(size);
    const violations = await axeViolations(page);
    t.deepEqual(violations, [], `${shot}: ${describeViolations(violations)}`);
    if (size === PHONE) {
      const overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth");
      // On failure, name the elements that stick out (outside a scrollable region).
      const wide = await page.evaluate(`[...document.querySelectorAll("body *")]
      .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
      .filter((e) => { for (let p = e.parentElement; p; p = p.parentElement)
        if (["auto", "scroll", "hidden"].includes(getComputedStyle(p).overflowX)) return false; return true; })
      .slice(0, 5).map((e) => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right)).join(", ")`);
      t.true(Number(overflow) <= 0, `${name} scrolls sideways at ${size.width} px by ${overflow}px: ${wide}`);
    }
    await screenshot(b, shots, shot, size === PHONE);
  }
  await page.setViewportSize(LAPTOP);
}

const row = (name: string) => page.locator("tr", { has: page.locator("th", { hasText: name }) });

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
    await row(name)
      .locator(".badge", { hasText: /^connected$/ })
      .waitFor({ timeout: LIVE_MS });
    t.pass();
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
});

test.serial(
  "dashboard - an API key (rck_) shown once and revoked; a registry password never comes back",
  async (t) => {
    await open("/app/keys", "API Keys");
    const name = uniq("ops-key");
    await page.getByRole("form", { name: "New API key" }).getByLabel("Name").fill(name);
    await page.getByRole("button", { name: "Create API key" }).click();
    const key = await page.getByRole("textbox", { name: "API key", exact: true }).inputValue();
    t.regex(key, /^rck_/);
    const tenant = () => request(s.c, "/api/tenant", { key: null, headers: { "x-api-key": key } });
    t.is((await tenant()).status, 200);
    await page.getByRole("button", { name: "Done" }).click();
    await row(name)
      .getByRole("button", { name: `Revoke ${name}` })
      .click();
    await page.getByRole("dialog").getByRole("button", { name: "Revoke key" }).click();
    await row(name).waitFor({ state: "detached" });
    t.is((await tenant()).status, 401, "the revoked API key is refused");
    await checkPage(t, "api-keys");

    await open("/app/registry", "Registry credentials");
    const password = `pw-${randomBytes(12).toString("hex")}`;
    const form = page.getByRole("form", { name: "Add a registry credential" });
    const cred = uniq("ghcr");
    await form.getByLabel("Name", { exact: true }).fill(cred);
    await form.getByLabel(/Registry/).fill("ghcr.io");
    await form.getByLabel("User name").fill("ci-bot");
    await form.getByLabel("Password or token").fill(password);
    await form.getByRole("button", { name: "Add credential" }).click();
    await row(cred).waitFor();
    t.regex((await row(cred).textContent()) ?? "", /ghcr\.io.*ghcr.*ci-bot/);
    t.is(await form.getByLabel("Password or token").inputValue(), "");
    t.false((await page.content()).includes(password), "password in the DOM");
    t.deepEqual(
      b.bodies.filter((body) => body.includes(password)),
      [],
      "password in a response",
    );
    await checkPage(t, "registry-credentials");
    await row(cred)
      .getByRole("button", { name: `Remove ${cred}` })
      .click();
    await page.getByRole("dialog").getByRole("button", { name: "Remove credential" }).click();
    await row(cred).waitFor({ state: "detached" });
  },
);

test.serial(
  "dashboard - Account: another browser's session is revoked from here and is signed out",
  async (t) => {
    const other = await b.browser.newContext({ baseURL: s.c.baseUrl });
    onCleanup(() => other.close());
    const phone = await other.newPage();
    await phone.goto("/login?next=/app/");
    await phone.getByLabel("E-mail").fill(owner.email);
    await phone.getByLabel("Password").fill(owner.password);
    await phone.getByRole("button", { name: "Sign in" }).click();
    await phone.waitForURL(/\/app\/$/);
    t.is((await phone.request.get("/api/me")).status(), 200);

    await open("/app/account", "Account");
    const sessions = page.getByRole("list", { name: "Browser sessions" }).locator("li");
    await sessions.nth(1).waitFor();
    t.is(await sessions.count(), 2);
    t.is(await sessions.filter({ hasText: "(this browser)" }).count(), 1);
    await checkPage(t, "account");
    await sessions
      .filter({ hasNotText: "(this browser)" })
      .getByRole("button", { name: /^Revoke/ })
      .click();
    await page.getByRole("dialog").getByRole("button", { name: "Revoke session" }).click();
    await sessions.nth(1).waitFor({ state: "detached" });
    t.is((await phone.request.get("/api/me")).status(), 401, "the revoked browser is signed out");
    t.is((await page.request.get("/api/me")).status(), 200, "this one is not");
  },
);

test.serial("dashboard - Members invites by a link shown once; Sign out ends the session", async (t) => {
  await open("/app/members", "Members");
  await row(owner.email).waitFor();
  const form = page.getByRole("form", { name: "Invite someone" });
  await form.getByLabel("E-mail").fill(`${uniq("dev")}@example.test`);
  await form.getByRole("button", { name: "Create invite link" }).click();
  const link = await page.getByRole("textbox", { name: "Invite link" }).inputValue();
  t.regex(link, /\/invite\/\S+$/);
  const invited = await fetch(link);
  t.is(invited.status, 200, "the link opens the invite page");
  await checkPage(t, "members");

  // Every page so far was checked at phone width too (checkPage).
  t.deepEqual(b.consoleErrors, [], "no script error and no CSP refusal in the console");

  // Sign out ends the session: the pages lead to sign-in again.
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(/\/login$/);
  await page.goto("/app/servers");
  t.regex(page.url(), /\/login\?next=%2Fapp%2Fservers$/);
  t.is((await page.request.get("/api/me")).status(), 401);
});

// Only a run where every test passed replaces the set the docs show (ava runs test.after
// after a failed test too; before test.after.always, so before cleanupAll removes the shots).
test.after(() => {
  if (allPassed) publishScreenshots(b);
});
