// The application pages in a real browser (issue 31, defects 1, 4 and 11): Debian's
// chromium, headless, against an installation that deploys for real (deploy-stack:
// NATS, MariaDB, api, gateway, Caddy, a podman agent). A refused form keeps every
// field and says why beside the field, in words; the application page says what is
// live and where (release, URL, server by name, container) and its Redeploy and
// Roll back work; the applications list shows status, live commit, last deploy and
// URL. Every page passes axe-core at laptop and phone widths. One browser, one stack,
// tests in order (each builds on the one before).
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import type { Page } from "playwright-core";
import {
  LAPTOP,
  PHONE,
  type Session,
  axeViolations,
  describeViolations,
  launchBrowser,
} from "./harness/browser";
import { cleanupAll } from "./harness/cleanup";
import { type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { APP_PORT, type AppRepo, createAppRepo } from "./harness/git-repo";
import { type Person, createOwner } from "./harness/people";
import { proxyGet } from "./harness/proxy-client";

const DEPLOY_MS = 150_000;

let s: DeployStack;
let repo: AppRepo;
let owner: Person;
let b: Session;
let page: Page;
/** The application the form tests create (from the browser) and the list test reads. */
let formApp: { id: string; name: string };
/** The application deployed twice, redeployed and rolled back. */
let liveApp: { id: string; name: string; fqdn: string; commit: string };
const uniq = (p: string) => `${p}-${randomBytes(3).toString("hex")}`;

test.before(async () => {
  [repo, s] = await Promise.all([
    createAppRepo({ first: "one" }),
    startDeployStack({
      // The page shows the container's state as the agent reports it: this agent watches its
      // containers (the harness turns the watch off; the default 5 s, for one agent only).
      agentEnv: { RELAYCTL_AGENT_CONTAINER_WATCH_SECONDS: "5" },
    }),
  ]);
  owner = await createOwner(s.c.db.url, s.c.tenantId);
  b = await launchBrowser(s.c.baseUrl);
  page = b.page;
  await page.goto("/login?next=/app/");
  await page.getByLabel("E-mail").fill(owner.email);
  await page.getByLabel("Password").fill(owner.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/app\//);
});
test.after.always(cleanupAll);

async function open(path: string, heading: string) {
  await page.goto(path);
  await page.getByRole("heading", { level: 1, name: heading }).waitFor();
  await page.locator(".loading").first().waitFor({ state: "detached" });
}

/** No serious or critical axe violation, at laptop and at phone width. */
async function axeBothWidths(t: ExecutionContext, name: string) {
  for (const [width, size] of [
    ["laptop", LAPTOP],
    ["phone", PHONE],
  ] as const) {
    await page.setViewportSize(size);
    const violations = await axeViolations(page);
    t.deepEqual(violations, [], `${name} at ${width} width: ${describeViolations(violations)}`);
  }
  await page.setViewportSize(LAPTOP);
}

/** The values of the named controls of a form, as the person sees them. */
async function valuesOf(form: ReturnType<Page["getByRole"]>, names: string[]) {
  const out: Record<string, string> = {};
  for (const n of names) out[n] = await form.locator(`[name="${n}"]`).inputValue();
  return out;
}

/** The control's error note: it is marked invalid and described by the note. */
async function errorOf(form: ReturnType<Page["getByRole"]>, name: string) {
  const control = form.locator(`[name="${name}"]`);
  const invalid = await control.getAttribute("aria-invalid");
  const describedBy = await control.getAttribute("aria-describedby");
  const note = describedBy ? ((await page.locator(`[id="${describedBy}"]`).textContent()) ?? "") : "";
  const focused = await control.evaluate((el) => el === el.ownerDocument.activeElement);
  return { invalid, note, focused };
}

const FIELDS = [
  "name",
  "linked_container_name",
  "container_port",
  "fqdns",
  "git_repository",
  "deploy_branch",
  "health_check_path",
  "health_check_timeout_seconds",
];

test.serial(
  "applications - a refused new application keeps every field and says why beside it",
  async (t) => {
    await open("/app/applications", "Applications");
    await page.getByRole("button", { name: "New application" }).click();
    const form = page.getByRole("form", { name: "New application" });
    const name = uniq("shop");
    await form.getByLabel("Name", { exact: true }).fill(name);
    await form.getByLabel("Container name").fill(name);
    await form.getByLabel("Container port").fill(String(APP_PORT));
    await form.getByLabel(/Domains/).fill("bad_domain");
    await form.getByLabel("Git repository URL").fill("https://git.example.com/acme/shop.git");
    await form.getByLabel("Deploy branch", { exact: true }).fill("release");
    await form.getByRole("group", { name: "Health check" }).getByLabel("Path").fill("/healthz");
    await form
      .getByRole("group", { name: "Health check" })
      .getByLabel(/Timeout/)
      .fill("45");
    const typed = await valuesOf(form, FIELDS);
    await form.getByRole("button", { name: "Create application" }).click();

    // The API refuses the domain (422 "fqdns[0]: ..."): said beside Domains, in words, focused.
    await form.locator(".field-error").waitFor();
    const domains = await errorOf(form, "fqdns");
    t.is(domains.invalid, "true");
    t.regex(domains.note, /^⚠?\s*Domain 1: 'bad_domain' is not a valid domain name/);
    t.true(domains.focused, "the field in error has focus");
    t.false((await form.textContent())?.includes("fqdns"), "no API path shown");
    await form.getByRole("alert").getByText("Not saved: check Domain 1 above.").waitFor();
    // Every field kept what was typed.
    t.deepEqual(await valuesOf(form, FIELDS), typed);
    await axeBothWidths(t, "new application refused");

    // Editing the field clears its mark; the second submit sends everything again and succeeds.
    await form.getByLabel(/Domains/).fill(`${name}.apps.test`);
    t.is(await form.locator('[name="fqdns"]').getAttribute("aria-invalid"), null);
    await form.getByRole("button", { name: "Create application" }).click();
    await page.waitForURL(/\/app\/applications\/[0-9a-f-]{36}$/);
    formApp = { id: page.url().split("/").pop()!, name };
    const created = await s.manage(`/applications/${formApp.id}`);
    t.like(created.json, {
      git_repository: "https://git.example.com/acme/shop.git",
      deploy_branch: "release",
      health_check_path: "/healthz",
      health_check_timeout_seconds: 45,
      fqdns: [`${name}.apps.test`],
    });

    // A 409 names its field too: the name is taken.
    await open("/app/applications", "Applications");
    await page.getByRole("button", { name: "New application" }).click();
    await form.getByLabel("Name", { exact: true }).fill(name);
    await form.getByLabel("Container name").fill(`${name}-2`);
    await form.getByLabel("Git repository URL").fill("https://git.example.com/acme/other.git");
    await form.getByRole("button", { name: "Create application" }).click();
    await form.locator(".field-error").waitFor();
    const taken = await errorOf(form, "name");
    t.is(taken.invalid, "true");
    t.regex(taken.note, new RegExp(`Name: an application named '${name}' already exists`));
    t.true(taken.focused);
    t.is(await form.getByLabel("Git repository URL").inputValue(), "https://git.example.com/acme/other.git");
  },
);

// Chromium aborts the requests in flight when a network interface comes or goes
// (ERR_NETWORK_CHANGED; podman's veths on a CI machine). A CI run had the Settings'
// /api/servers cut so: Settings showed "cannot be reached" and never its form, as the
// load was not asked again until the page was reloaded. Here the first one is cut on purpose.
test.serial(
  "application settings - a load cut by the network is asked again, no reload needed",
  async (t) => {
    let asked = 0;
    await page.route("**/api/servers", (route) =>
      ++asked === 1 ? route.abort("internetdisconnected") : route.continue(),
    );
    try {
      await open(`/app/applications/${formApp.id}`, formApp.name);
      await page.getByText("Settings", { exact: true }).click();
      const settings = page.locator("details", {
        has: page.getByRole("heading", { name: "Settings", exact: true }),
      });
      const form = settings.getByRole("form", { name: "Edit application" });
      // The servers' answer reached the form: its server is offered by name.
      await form
        .getByLabel("Server", { exact: true })
        .locator("option", { hasText: s.c.serverName })
        .waitFor({ state: "attached" });
      t.is(asked, 2, "asked once more after the cut, then no more");
      t.is(await settings.getByRole("alert").count(), 0, "the cut's note is gone with the answer");
      t.true(await form.getByLabel("Deploy branch", { exact: true }).isVisible());
    } finally {
      await page.unroute("**/api/servers");
    }
  },
);

test.serial(
  "application settings - a refused save keeps every edit and says why beside the field",
  async (t) => {
    await open(`/app/applications/${formApp.id}`, formApp.name);
    await page.getByText("Settings", { exact: true }).click();
    const form = page.getByRole("form", { name: "Edit application" });
    await form.getByLabel("Deploy branch", { exact: true }).fill("main");
    await form.getByRole("group", { name: "Health check" }).getByLabel("Path").fill("/ready");
    await form.getByLabel(/Domains/).fill(`${formApp.name}.apps.test\nnot a domain`);
    const typed = await valuesOf(form, FIELDS);
    await form.getByRole("button", { name: "Save changes" }).click();

    await form.locator(".field-error").waitFor();
    const domains = await errorOf(form, "fqdns");
    t.is(domains.invalid, "true");
    t.regex(domains.note, /Domain 2: 'not a domain' is not a valid domain name/);
    t.true(domains.focused);
    // The edits stay, even across the page's own refreshes of the application (5 s).
    t.deepEqual(await valuesOf(form, FIELDS), typed);
    await page.waitForResponse((r) => r.url().endsWith(`/api/applications/${formApp.id}`));
    t.deepEqual(await valuesOf(form, FIELDS), typed);
    t.true(await form.getByLabel("Deploy branch", { exact: true }).isVisible(), "Settings still open");
    t.is((await s.manage(`/applications/${formApp.id}`)).json.health_check_path, "/healthz", "nothing saved");
    await axeBothWidths(t, "settings refused");

    await form.getByLabel(/Domains/).fill(`${formApp.name}.apps.test`);
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Saved.").waitFor();
    t.like((await s.manage(`/applications/${formApp.id}`)).json, {
      deploy_branch: "main",
      health_check_path: "/ready",
    });
  },
);

/** Clicks an action's button, confirms it, and waits for the deployment it opens to end. */
async function runAction(t: ExecutionContext, button: string, confirm: string) {
  await page.getByRole("region", { name: "Live now" }).getByRole("button", { name: button }).click();
  await page.getByRole("dialog").getByRole("button", { name: confirm }).click();
  await page.waitForURL(/\/deployments\/[0-9a-f-]{36}$/);
  const deploymentId = page.url().split("/").pop()!;
  await page
    .getByTestId("deployment-status")
    .getByText(/^(completed|failed|timeout)$/)
    .waitFor({ timeout: DEPLOY_MS });
  const d = await s.deployment(liveApp.id, deploymentId);
  t.is(d.json.status, "completed", d.text);
  return deploymentId;
}

test.serial("application page - what is live and where; Redeploy and Roll back work", async (t) => {
  const app = await s.createApp({}, repo);
  liveApp = { id: app.id, name: app.name, fqdn: app.fqdn, commit: "" };
  const first = await s.deployAndWait(app.id);
  t.like(first.op.json, { status: "completed" }, first.op.text);
  const one = repo.head().sha;
  await repo.commitVersion("two");
  const second = await s.deployAndWait(app.id);
  t.like(second.op.json, { status: "completed" }, second.op.text);
  const two = repo.head().sha;

  await open(`/app/applications/${app.id}`, app.name);
  const live = page.getByRole("region", { name: "Live now" });
  const release = page.getByTestId("application-live-release");
  await release.getByRole("link", { name: two.slice(0, 10) }).waitFor();
  t.is(
    await release.getByRole("link", { name: two.slice(0, 10) }).getAttribute("href"),
    `/app/applications/${app.id}/deployments/${second.deploymentId}`,
  );
  t.truthy(await release.locator("time").getAttribute("datetime"));
  // Its URL is a link; the server is named, its UUID shown nowhere.
  const urls = (await s.manage(`/applications/${app.id}`)).json.urls as string[];
  t.true(urls.length > 0);
  t.is(
    await page.getByTestId("application-url").getByRole("link", { name: urls[0] }).getAttribute("href"),
    urls[0]!,
  );
  const server = page.getByTestId("application-server").getByRole("link", { name: s.c.serverName });
  t.is(await server.getAttribute("href"), `/app/servers/${s.c.serverId}`);
  t.false((await page.locator("body").innerText()).includes(s.c.serverId), "server UUID shown");
  await page.getByTestId("application-container").getByText("running").waitFor();
  await axeBothWidths(t, "application page");

  // Roll back: the release before the live one starts again, nothing built.
  t.is(await live.getByRole("button", { name: `Roll back to ${one.slice(0, 10)}` }).count(), 1);
  const rolledBack = await runAction(t, `Roll back to ${one.slice(0, 10)}`, "Roll back");
  t.is((await proxyGet(s.proxyPort, app.fqdn)).body.trim(), "version one");
  await open(`/app/applications/${app.id}`, app.name);
  await release.getByText("(a rollback)").waitFor();
  t.is(
    await release.getByRole("link", { name: one.slice(0, 10) }).getAttribute("href"),
    `/app/applications/${app.id}/deployments/${rolledBack}`,
  );

  // Redeploy: the live commit is fetched and built again and goes live.
  await runAction(t, `Redeploy commit ${one.slice(0, 10)}`, "Redeploy");
  t.is((await proxyGet(s.proxyPort, app.fqdn)).body.trim(), "version one");
  const after = await s.manage(`/applications/${app.id}`);
  const nowLive = after.json.live_release as { commit_sha?: string; rollback_of?: string | null } | undefined;
  t.is(nowLive?.commit_sha, one);
  t.is(nowLive?.rollback_of, null, "a new build, not a rollback");
  liveApp.commit = one;
});

test.serial("applications list - status, live commit, last deploy and URL of each", async (t) => {
  await open("/app/applications", "Applications");
  const row = (name: string) => page.locator("tr", { has: page.locator("th", { hasText: name }) });
  const listed = (await s.manage("/applications")).json.applications as {
    id: string;
    url: string;
    last_deployment: { deployment_id: string; created_at: string } | null;
  }[];
  const deployed = listed.find((a) => a.id === liveApp.id)!;
  t.truthy(deployed.last_deployment);

  const live = row(liveApp.name);
  await live.getByText("running", { exact: true }).waitFor();
  t.regex((await live.textContent()) ?? "", new RegExp(liveApp.commit.slice(0, 10)));
  const last = live.getByRole("link", { name: /ago|just now/ });
  t.is(
    await last.getAttribute("href"),
    `/app/applications/${liveApp.id}/deployments/${deployed.last_deployment!.deployment_id}`,
  );
  t.is(await last.locator("time").getAttribute("datetime"), deployed.last_deployment!.created_at);
  t.is((await live.locator(".badge", { hasText: "completed" }).count()) > 0, true);
  t.is(await live.getByRole("link", { name: deployed.url }).getAttribute("href"), deployed.url);
  t.regex((await live.textContent()) ?? "", new RegExp(s.c.serverName));

  // Never deployed: says so, in words.
  const idle = row(formApp.name);
  await idle.getByText("not deployed").waitFor();
  t.regex((await idle.textContent()) ?? "", /never/);
  t.false((await page.locator("body").innerText()).includes(s.c.serverId), "server UUID shown");
  await axeBothWidths(t, "applications list");

  // A deployment under way (its fetch and build take seconds): the application page says so
  // and links to it, the list's last deploy links to it, and once it ends the page stops saying so.
  const started = await s.deploy(liveApp.id);
  t.is(started.status, 202, started.text);
  const deploymentPath = `/app/applications/${liveApp.id}/deployments/${started.json.deployment_id}`;
  await open(`/app/applications/${liveApp.id}`, liveApp.name);
  const deploying = page.getByTestId("application-deploying");
  await deploying.locator(`a[href="${deploymentPath}"]`).waitFor();
  t.regex((await deploying.textContent()) ?? "", /queued|running/);
  await open("/app/applications", "Applications");
  await live.locator(`a[href="${deploymentPath}"]`).waitFor();
  const op = await s.waitOperation(String(started.json.operation_id));
  t.is(op.json.status, "completed", op.text);
  await open(`/app/applications/${liveApp.id}`, liveApp.name);
  await page.getByTestId("application-live-release").locator(`a[href="${deploymentPath}"]`).waitFor();
  t.is(await deploying.count(), 0);
});
