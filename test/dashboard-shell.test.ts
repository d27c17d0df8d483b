// The dashboard's shell in real Chromium (issue 31, defects 6, 10 and 11), against a real
// installation (cluster: NATS, MariaDB, api, gateway, an agent that runs commands):
// at phone width the navigation is a menu that reaches every page, by mouse and by
// keyboard; a table keeps an operation's Status, Exit and Output on screen and wraps a
// long command; an unknown dashboard path answers 404 with the dashboard's "not found"
// page; the favicon is served and linked; times read "3 min ago" with the absolute time
// on hover, and move on as time passes.
import test from "ava";
import type { BrowserContext, Page } from "playwright-core";
import {
  LAPTOP,
  PHONE,
  type Session,
  axeViolations,
  describeViolations,
  launchBrowser,
} from "./harness/browser";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { api } from "./harness/http";
import { createOwner } from "./harness/people";

// The phone (390×844) besides the harness's narrowest one (375).
const PHONES = [PHONE, { width: 390, height: 844 }];
// Pages the navigation offers an owner (at least: the test walks every entry it finds).
const NAV = [
  "Servers",
  "Applications",
  "API Keys",
  "Registry credentials",
  "GitHub",
  "Git hosts",
  "Activity",
  "Audit log",
  "Members",
  "Account",
];

let c: Cluster;
let b: Session;
let page: Page;

test.before(async () => {
  c = await startCluster();
  const owner = await createOwner(c.db.url, c.tenantId);
  b = await launchBrowser(c.baseUrl);
  page = b.page;
  await page.goto("/login?next=/app/");
  await page.getByLabel("E-mail").fill(owner.email);
  await page.getByLabel("Password").fill(owner.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/app\/$/);
});
test.after.always(cleanupAll);

// What a cell's ::before shows (its label); run in the page (the test files have no DOM types).
const beforeContent = (e: unknown): string =>
  (
    globalThis as unknown as { getComputedStyle(e: unknown, pseudo: string): { content: string } }
  ).getComputedStyle(e, "::before").content;

const heading = (p: Page, name: string) => p.getByRole("heading", { level: 1, name });

async function noSeriousAxe(t: { deepEqual: (a: unknown, b: unknown, m?: string) => void }, what: string) {
  await page.locator(".loading").first().waitFor({ state: "detached" });
  const violations = await axeViolations(page);
  t.deepEqual(violations, [], `${what}: ${describeViolations(violations)}`);
}

test.serial(
  "dashboard shell - at phone width the menu reaches every page, by mouse and by keyboard",
  async (t) => {
    const menu = page.getByRole("button", { name: "Menu" });
    const nav = page.getByRole("navigation", { name: "Main" });
    // The entries as a laptop shows them.
    await page.setViewportSize(LAPTOP);
    await page.goto("/app/servers");
    await heading(page, "Servers").waitFor();
    const links = nav.getByRole("link");
    const entries: { label: string; href: string }[] = [];
    for (let i = 0; i < (await links.count()); i++)
      entries.push({
        label: ((await links.nth(i).textContent()) ?? "").trim(),
        href: (await links.nth(i).getAttribute("href")) ?? "",
      });
    for (const label of NAV)
      t.truthy(
        entries.find((e) => e.label === label),
        `${label} in the navigation`,
      );

    for (const size of PHONES) {
      await page.setViewportSize(size);
      await page.goto("/app/servers");
      await heading(page, "Servers").waitFor();
      t.is(await menu.getAttribute("aria-expanded"), "false");
      t.false(await nav.getByRole("link", { name: "Account" }).isVisible(), "the menu starts closed");

      for (const { label, href } of entries) {
        await menu.click();
        t.is(await menu.getAttribute("aria-expanded"), "true");
        const link = nav.getByRole("link", { name: label, exact: true });
        // Every entry is on screen, not in a strip that scrolls sideways.
        const box = await link.boundingBox();
        t.truthy(box, `${label} at ${size.width} px`);
        t.true(box!.x >= 0 && box!.x + box!.width <= size.width, `${label} is on screen at ${size.width} px`);
        await link.click();
        await page.waitForURL((u) => u.pathname === href);
        await page.getByRole("heading", { level: 1 }).waitFor();
        if (NAV.includes(label)) await heading(page, label).waitFor();
        // (The menu is closed: CSS finds the hidden link, roles would not.)
        t.is(
          await page.locator(`nav a[href="${href}"]`).getAttribute("aria-current"),
          "page",
          `${label} current`,
        );
        t.is(await menu.getAttribute("aria-expanded"), "false", `the menu closes on opening ${label}`);
        t.false(await link.isVisible());
      }
      await noSeriousAxe(t, `the last page at ${size.width} px, menu closed`);
      await menu.click();
      // The header has room for the menu only: who is signed in and Sign out are in the menu.
      t.true(await nav.getByRole("button", { name: "Sign out" }).isVisible());
      t.false(await page.getByRole("banner").getByRole("button", { name: "Sign out" }).isVisible());
      await noSeriousAxe(t, `the last page at ${size.width} px, menu open`);
      await menu.click();
    }

    // By keyboard: Enter opens, Tab reaches the links, Escape closes and gives focus back.
    await menu.focus();
    await page.keyboard.press("Enter");
    t.is(await menu.getAttribute("aria-expanded"), "true");
    await page.keyboard.press("Tab");
    t.is(await page.evaluate("document.activeElement.textContent"), "Servers");
    await page.keyboard.press("Escape");
    t.is(await menu.getAttribute("aria-expanded"), "false");
    t.is(await page.evaluate("document.activeElement.getAttribute('aria-controls')"), "main-nav");
    await page.keyboard.press("Enter");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Enter");
    await heading(page, "Applications").waitFor();

    // At laptop width there is no menu button: the navigation is always there.
    await page.setViewportSize(LAPTOP);
    t.false(await menu.isVisible());
    t.true(
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Account" }).isVisible(),
    );
  },
);

test.serial(
  "dashboard shell - a phone's operations table keeps Status, Exit and Output on screen",
  async (t) => {
    const runId = `run-${Math.random().toString(36).slice(2, 8)}`;
    // A long command without spaces: clipped before, wrapped within its cell now.
    const long = `echo ${"x".repeat(120)}; exit 4`;
    const res = await api(c, "/exec", {
      body: { server_id: c.serverId, command: `sh -c '${long}'`, run_id: runId },
    });
    t.is(res.status, 200, res.text);

    for (const size of PHONES) {
      await page.setViewportSize(size);
      await page.goto(`/app/activity?run_id=${runId}`);
      const table = page.getByTestId("operations");
      const op = table.locator("tbody tr").first();
      await op.getByText("Output", { exact: false }).first().waitFor();
      for (const column of ["Status", "Exit", "Output", "Command"]) {
        const cell = op.locator(`td[data-label="${column}"]`);
        const box = await cell.boundingBox();
        t.truthy(box, column);
        t.true(
          box!.x >= 0 && box!.x + box!.width <= size.width,
          `${column} is on screen at ${size.width} px (${box!.x}..${box!.x + box!.width})`,
        );
        // Its label is shown with it, as the column header would be.
        t.is((await cell.evaluate(beforeContent)).split("/")[0].trim(), `"${column}"`);
      }
      t.is((await op.locator('td[data-label="Exit"]').textContent())?.trim(), "4");
      // The whole command is there to read: nothing overflows its cell.
      const cmd = op.locator('td[data-label="Command"]');
      t.regex((await cmd.textContent()) ?? "", /x{120}; exit 4/);
      t.true(await cmd.evaluate((e) => e.scrollWidth <= e.clientWidth), "the command wraps within its cell");
      const overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth");
      t.true(Number(overflow) <= 0, `the page scrolls sideways by ${overflow}px at ${size.width} px`);
      await noSeriousAxe(t, `activity at ${size.width} px`);
    }
    await page.setViewportSize(LAPTOP);
  },
);

test.serial(
  "dashboard shell - an unknown dashboard path answers 404 with the dashboard's not-found page",
  async (t) => {
    for (const path of ["/app/nope", "/app/servers/extra/parts", "/app/applications/a-1/deployments"]) {
      const res = await page.goto(path);
      t.is(res?.status(), 404, path);
      await heading(page, "Page not found").waitFor();
      // Still the dashboard: its navigation leads on.
      t.true(
        await page
          .getByRole("navigation", { name: "Main" })
          .getByRole("link", { name: "Servers" })
          .isVisible(),
      );
    }
    await noSeriousAxe(t, "not found");
    // A page that exists, deep-linked, is a 200.
    t.is((await page.goto("/app/keys/automation"))?.status(), 200);
    t.is((await page.goto("/app/"))?.status(), 200);
    await heading(page, "Servers").waitFor();
  },
);

test.serial(
  "dashboard shell - the favicon is linked, served as SVG under the CSP, cached like the assets",
  async (t) => {
    await page.goto("/app/servers");
    const href = await page.locator("link[rel='icon']").getAttribute("href");
    t.regex(href ?? "", /^\/app\/assets\/favicon-[0-9a-f]+\.svg$/);
    const icon = await page.request.get(href!);
    t.is(icon.status(), 200);
    t.regex(icon.headers()["content-type"] ?? "", /^image\/svg\+xml/);
    t.regex(icon.headers()["cache-control"] ?? "", /max-age=31536000.*immutable/);
    t.regex(await icon.text(), /<svg/);
    // Pages that name no icon (sign-in, /docs) get it at /favicon.ico.
    const ico = await page.request.get("/favicon.ico");
    t.is(ico.status(), 200);
    t.is(ico.url(), new URL(href!, c.baseUrl).toString());
    // The browser loaded it without a CSP refusal (img-src 'self').
    t.deepEqual(b.consoleErrors, []);
  },
);

test.serial(
  "dashboard shell - times read how long ago, the absolute time on hover, and move on",
  async (t) => {
    const made = await api(c, "/exec", { body: { server_id: c.serverId, command: "true" } });
    t.is(made.status, 200, made.text);
    // A page of its own with a clock the test moves (the other pages keep real time).
    const context: BrowserContext = await b.browser.newContext({
      baseURL: c.baseUrl,
      viewport: LAPTOP,
      storageState: await b.context.storageState(),
    });
    onCleanup(() => context.close());
    const p = await context.newPage();
    await p.clock.install();
    await p.goto("/app/activity");
    await heading(p, "Activity").waitFor();
    const time = p.getByTestId("operations").locator("tbody tr").first().locator("time");
    await time.waitFor();
    t.regex((await time.textContent()) ?? "", /^(just now|1 min ago)$/);
    const iso = (await time.getAttribute("datetime"))!;
    t.is(await time.getAttribute("title"), await p.evaluate((d) => new Date(d).toLocaleString(), iso));
    // Three minutes later the same row says so, without a reload.
    await p.clock.fastForward("03:00");
    await p
      .getByTestId("operations")
      .locator("tbody tr")
      .first()
      .locator("time", { hasText: /^[34] min ago$/ })
      .waitFor();
    t.is(await time.getAttribute("datetime"), iso);
  },
);
