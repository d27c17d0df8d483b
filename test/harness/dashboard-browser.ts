// What the dashboard's real-browser tests share (dashboard-browser*.test.ts): Debian's chromium,
// headless, against a whole installation that deploys for real (deploy-stack: NATS, MariaDB,
// api, gateway, Caddy, a podman agent), an owner to sign in as, and the check every page passes:
// axe-core (no serious or critical violation) at laptop and at phone width, where no page
// scrolls sideways, with a screenshot of each; a file's set is copied to docs/screenshots/ when
// all its tests passed, and a failed test's page is kept. One browser and one stack per test
// file: dashboardBrowser() registers the hooks that set the bindings below before the file's
// tests run (they are this module's, so the helpers here read them too).
import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ExecutionContext, TestFn } from "ava";
import type { Page } from "playwright-core";
import {
  LAPTOP,
  PHONE,
  type Session,
  axeViolations,
  describeViolations,
  launchBrowser,
  publishScreenshots,
  screenshot,
} from "./browser";
import { cleanupAll, makeTempDir } from "./cleanup";
import { type DeployStack, startDeployStack } from "./deploy-stack";
import { type AppRepo, createAppRepo } from "./git-repo";
import { type Person, createOwner } from "./people";

export const LIVE_MS = 20_000;

export let s: DeployStack;
export let repo: AppRepo;
export let owner: Person;
export let b: Session;
export let page: Page;
let shots: string;
const FAILURES = join(tmpdir(), "relayctl-dashboard-failures");
export const uniq = (p: string) => `${p}-${randomBytes(3).toString("hex")}`;

/**
 * Registers the file's hooks: stack, owner and browser before its tests (the owner signed in on
 * /login when `signedIn`), a failed test's page kept, the screenshots published when every test
 * passed, everything cleaned up after.
 */
export function dashboardBrowser(test: TestFn, o: { signedIn?: boolean } = {}): void {
  test.before(async () => {
    [repo, s] = await Promise.all([createAppRepo({ first: "1" }), startDeployStack()]);
    owner = await createOwner(s.c.db.url, s.c.tenantId);
    b = await launchBrowser(s.c.baseUrl);
    page = b.page;
    shots = makeTempDir("dashboard-shots");
    if (o.signedIn) await signIn();
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
  // Only a run where every test passed replaces the set the docs show (ava runs test.after
  // after a failed test too; before test.after.always, so before cleanupAll removes the shots).
  test.after(() => {
    if (allPassed) publishScreenshots(b);
  });
}

/** The owner signed in on /login, as a person does, and on the dashboard. */
async function signIn(): Promise<void> {
  await page.goto("/login?next=/app/");
  await page.getByLabel("E-mail").fill(owner.email);
  await page.getByLabel("Password").fill(owner.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/app\/$/);
}

/** Opens a dashboard path and waits for its page heading. */
export async function open(path: string, heading: string) {
  const res = await page.goto(path);
  await page.getByRole("heading", { level: 1, name: heading }).waitFor();
  return res;
}

/**
 * The page as shown, at laptop and at phone width: no serious or critical axe violation,
 * nothing sticking out sideways on the phone, and a screenshot of each (<name>.png, the
 * viewport, and <name>-phone.png, the whole page: the set docs/screenshots/ gets).
 */
export async function checkPage(t: ExecutionContext, name: string) {
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

export const row = (name: string) => page.locator("tr", { has: page.locator("th", { hasText: name }) });
