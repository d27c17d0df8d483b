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
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type FleetServer, addFleetServer, breakBaseImage } from "./harness/fleet-stack";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { createOwner } from "./harness/people";
import { proxyGet } from "./harness/proxy-client";

const ROLLOUT_MS = 240_000;
const tag = `df${Math.random().toString(36).slice(2, 7)}`;

let s: DeployStack;
let b: Session;
let page: Page;
let app: App;
let repo: AppRepo;
let one: FleetServer;
let two: FleetServer;

test.before(async () => {
  const [r, stack] = await Promise.all([createAppRepo({ first: "1" }), startDeployStack()]);
  [repo, s] = [r, stack];
  [one, two] = await Promise.all([
    addFleetServer(s, `${tag}-one`, { tier: "web" }),
    addFleetServer(s, `${tag}-two`, { zone: "b" }),
  ]);
  app = await s.createApp({ server_id: one.id, health_check_timeout_seconds: 10 }, repo);
  const owner = await createOwner(s.c.db.url, s.c.tenantId);
  b = await launchBrowser(s.c.baseUrl);
  page = b.page;
  await page.goto("/login?next=/app/");
  await page.getByLabel("E-mail").fill(owner.email);
  await page.getByLabel("Password").fill(owner.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/app\//);
});
test.after.always(cleanupAll);

async function open(path: string, heading: string | RegExp) {
  await page.goto(path);
  await page.getByRole("heading", { level: 1, name: heading }).waitFor();
  await page.locator(".loading").first().waitFor({ state: "detached" });
}

/** No serious or critical axe violation at laptop and phone widths, and nothing wider than a phone. */
async function checkPage(t: ExecutionContext, name: string) {
  for (const [width, size] of [
    ["laptop", LAPTOP],
    ["phone", PHONE],
  ] as const) {
    await page.setViewportSize(size);
    const violations = await axeViolations(page);
    t.deepEqual(violations, [], `${name} at ${width} width: ${describeViolations(violations)}`);
  }
  const overflow = Number(await page.evaluate("document.documentElement.scrollWidth - window.innerWidth"));
  t.true(overflow <= 0, `${name} scrolls sideways at phone width by ${overflow}px`);
  await page.setViewportSize(LAPTOP);
}

const labelsOf = async (id: string) =>
  (await s.manage(`/servers/${id}`)).json.labels as Record<string, string>;

test.serial(
  "dashboard fleets - a server's labels edited on its page persist and show in the list",
  async (t) => {
    await open(`/app/servers/${two.id}`, `Server ${two.name}`);
    const form = page.getByRole("form", { name: "Add a label" });
    // A bad key is refused in words beside the field, and nothing is sent.
    await form.getByLabel("Key").fill("-bad");
    await form.getByRole("button", { name: "Add label" }).click();
    await page.locator("#label-error").waitFor();
    t.regex((await page.locator("#label-error").textContent()) ?? "", /Key: a key is 1 to 63 letters/);
    t.is(await form.getByLabel("Key").getAttribute("aria-invalid"), "true");
    t.deepEqual(await labelsOf(two.id), { zone: "b" });

    await form.getByLabel("Key").fill("tier");
    await form.getByLabel("Value").fill("web");
    await form.getByRole("button", { name: "Add label" }).click();
    await page.getByRole("listitem").filter({ hasText: "tier=web" }).first().waitFor();
    await page.getByRole("button", { name: "Remove label zone=b" }).click();
    await page.getByRole("button", { name: "Remove label zone=b" }).waitFor({ state: "detached" });
    t.deepEqual(await labelsOf(two.id), { tier: "web" }, "saved through PUT /api/servers/{id}/labels");
    await checkPage(t, "the server page with its labels");

    // After a reload the page shows what was stored, and the list shows each server's labels.
    await open("/app/servers", "Servers");
    const row = page.locator(`tr[data-server-id="${two.id}"]`);
    t.regex((await row.textContent()) ?? "", /tier=web/);
    t.notRegex((await row.textContent()) ?? "", /zone=b/);
    await checkPage(t, "the servers list with labels");
  },
);

test.serial(
  "dashboard fleets - a selector placement shows the servers it matches and saves with a strategy",
  async (t) => {
    await open(`/app/applications/${app.id}`, app.name);
    await page.getByText("Settings", { exact: true }).click();
    const form = page.getByRole("form", { name: "Edit application" });
    await form.getByLabel("Runs on").selectOption({ label: "the servers matching a label selector" });
    const selector = form.getByRole("textbox", { name: "Label selector" });
    const matches = form.getByTestId("selector-matches");
    await selector.fill("tier=nowhere");
    await matches.getByText("Matches no server now").waitFor();
    await selector.fill("tier=web");
    await matches.getByText("Matches 2 servers now:").waitFor();
    const names = await matches.getByRole("listitem").allTextContents();
    t.deepEqual(names.sort(), [one.name, two.name].sort(), "the cluster's own server has no tier label");

    // A refused strategy is told beside its field, in the form's words.
    await form.getByLabel("Servers at once").fill("0%");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.locator(".field-error").waitFor();
    t.regex((await form.locator(".field-error").textContent()) ?? "", /^Servers at once: /);
    t.is(await form.getByLabel("Servers at once").getAttribute("aria-invalid"), "true");
    t.is((await s.manage(`/applications/${app.id}`)).json.placement, null, "nothing saved");

    await form.getByLabel("Servers at once").fill("100%");
    // A drain past 600 s is refused beside its own field, its hint naming the health path.
    const drain = form.getByRole("textbox", { name: "Drain before each server (seconds)" });
    const hintId = (await drain.getAttribute("aria-describedby"))?.split(" ")[0];
    t.regex((await form.locator(`[id="${hintId}"]`).textContent()) ?? "", /\/\.well-known\/relayctl\/health/);
    await drain.fill("601");
    await form.getByRole("button", { name: "Save changes" }).click();
    // The earlier error stays until the answer replaces it: wait for this one's words.
    const drainError = form.locator(".field-error", { hasText: /^Drain before each server: / });
    await drainError.waitFor();
    t.regex((await drainError.textContent()) ?? "", /^Drain before each server: must be <= 600$/);
    t.is(await form.locator(".field-error").count(), 1, "one error, beside the drain");
    t.is(await drain.getAttribute("aria-invalid"), "true");
    t.is(await form.getByLabel("Servers at once").getAttribute("aria-invalid"), null);
    t.is((await s.manage(`/applications/${app.id}`)).json.placement, null, "nothing saved");

    await drain.fill("2");
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Saved.").waitFor();
    const stored = (await s.manage(`/applications/${app.id}`)).json;
    t.deepEqual(stored.placement, { selector: "tier=web" });
    t.deepEqual(stored.rollout_strategy, { max_parallel: "100%", drain_seconds: 2 });
    await checkPage(t, "the settings with a selector placement");
  },
);

test.serial(
  "dashboard fleets - Deploy opens the rollout, whose grid of servers and steps goes to succeeded",
  async (t) => {
    await open(`/app/applications/${app.id}`, app.name);
    await page.getByRole("form", { name: "Deploy" }).getByRole("button", { name: "Deploy" }).click();
    await page.waitForURL(/\/rollouts\/[0-9a-f-]+$/);
    const rolloutId = page.url().split("/").pop()!;
    await page.getByRole("heading", { level: 1, name: `Rollout of ${app.name}` }).waitFor();
    // The page refreshes on its own: no reload here.
    await page
      .getByTestId("rollout-status")
      .getByText(/^(succeeded|halted|failed)$/)
      .waitFor({ timeout: ROLLOUT_MS });
    t.is((await page.getByTestId("rollout-status").textContent())?.trim(), "succeeded");
    const grid = page.getByTestId("rollout-grid");
    for (const srv of [one, two]) {
      const row = grid.locator(`tr[data-server="${srv.name}"]`);
      t.is(await row.getAttribute("data-state"), "succeeded", srv.name);
      // Each step the deployment ran is a badge in its column: the state, and fetch to switch, succeeded.
      await row.locator(".badge-succeeded").nth(5).waitFor({ timeout: 60_000 });
      for (const step of ["health check", "switch"])
        t.is(
          (await row.locator(`td[data-label="${step}"]`).textContent())?.trim(),
          "succeeded",
          `${srv.name}: ${step}`,
        );
      const link = row.getByRole("link", { name: `deployment on ${srv.name}` });
      t.regex(
        (await link.getAttribute("href")) ?? "",
        new RegExp(`/app/applications/${app.id}/deployments/`),
      );
      t.is((await proxyGet(srv.proxyPort, app.fqdn)).body, "version 1", `${srv.name} serves it`);
    }
    const api = (await s.manage(`/applications/${app.id}/rollouts/${rolloutId}`)).json;
    t.is(api.status, "succeeded");
    await checkPage(t, "the rollout page");

    // The application's page lists the rollout, linked to its page.
    await open(`/app/applications/${app.id}`, app.name);
    const listed = page.locator(`tr[data-rollout-id="${rolloutId}"]`);
    t.regex((await listed.textContent()) ?? "", /succeeded/);
    await listed.getByRole("link").click();
    await page.waitForURL(new RegExp(`/rollouts/${rolloutId}$`));
  },
);

/** Waits on the rollout page (it refreshes on its own) for the rollout's end; its id and status. */
async function rolloutEnd() {
  await page.waitForURL(/\/rollouts\/[0-9a-f-]{36}$/);
  const id = page.url().split("/").pop()!;
  await page
    .getByTestId("rollout-status")
    .getByText(/^(succeeded|halted|failed)$/)
    .waitFor({ timeout: ROLLOUT_MS });
  return { id, status: (await page.getByTestId("rollout-status").textContent())?.trim() };
}

test.serial("dashboard fleets - Roll back on a fleet rolls every server back, as a rollout", async (t) => {
  await repo.commitVersion("2");
  await open(`/app/applications/${app.id}`, app.name);
  await page.getByRole("form", { name: "Deploy" }).getByRole("button", { name: "Deploy" }).click();
  t.is((await rolloutEnd()).status, "succeeded");
  for (const srv of [one, two]) t.is((await proxyGet(srv.proxyPort, app.fqdn)).body, "version 2", srv.name);

  await open(`/app/applications/${app.id}`, app.name);
  const live = page.getByRole("region", { name: "Live now" });
  await live.getByRole("button", { name: /^Roll back to / }).click();
  const dialog = page.getByRole("dialog");
  t.regex((await dialog.textContent()) ?? "", /Roll back every server of this fleet/);
  await dialog.getByRole("button", { name: "Roll back" }).click();
  const end = await rolloutEnd();
  t.is(end.status, "succeeded");
  const r = (await s.manage(`/applications/${app.id}/rollouts/${end.id}`)).json;
  t.is(r.kind, "rollback");
  for (const srv of [one, two]) t.is((await proxyGet(srv.proxyPort, app.fqdn)).body, "version 1", srv.name);
  // A fleet's releases are per server: no release of the home server's list is offered alone.
  t.is(
    await page
      .getByRole("table", { name: "Releases" })
      .getByRole("button", { name: /Roll back/ })
      .count(),
    0,
  );
});

test.serial(
  "dashboard fleets - a halted rollout says why and names the failed server and its step",
  async (t) => {
    // Server two's base image is broken (its httpd never answers): the new version fails its health check there only.
    await breakBaseImage(t, two);
    await repo.commitVersion("3");

    await open(`/app/applications/${app.id}`, app.name);
    await page.getByRole("form", { name: "Deploy" }).getByRole("button", { name: "Deploy" }).click();
    const end = await rolloutEnd();
    t.is(end.status, "halted");
    const failed = page.getByTestId("rollout-failed");
    t.regex((await failed.textContent()) ?? "", new RegExp(`${two.name}: failed at step health_check`));
    t.truthy((await page.getByTestId("rollout-detail").textContent())?.trim(), "the halt's reason is shown");
    const grid = page.getByTestId("rollout-grid");
    t.is(await grid.locator(`tr[data-server="${two.name}"]`).getAttribute("data-state"), "failed");
    t.is(
      (
        await grid.locator(`tr[data-server="${two.name}"] td[data-label="health check"]`).textContent()
      )?.trim(),
      "failed",
    );
    // The server already switched goes back to its previous release (the page follows it there):
    // its row leaves rolling_back, and the rollout's own record says how if it did not go back.
    await grid
      .locator(`tr[data-server="${one.name}"]:is([data-state="rolled_back"], [data-state="rollback_failed"])`)
      .waitFor({ timeout: ROLLOUT_MS });
    const servers = (await s.manage(`/applications/${app.id}/rollouts/${end.id}`)).json.servers;
    t.is(
      await grid.locator(`tr[data-server="${one.name}"]`).getAttribute("data-state"),
      "rolled_back",
      JSON.stringify(servers),
    );
    await grid.getByRole("link", { name: `rollback on ${one.name}` }).waitFor();
    await checkPage(t, "a halted rollout");
  },
);
