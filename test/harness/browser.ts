// A real browser for the dashboard tests: Debian's chromium driven headless by
// playwright-core (never the full playwright package: its browser download fails
// here), axe-core run inside each page (no serious or critical violation allowed),
// every response body recorded (so a test can prove a secret never came back),
// and screenshots saved under the test's temp dir, the latest set copied to
// docs/screenshots/ for the README.
import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type Browser, type BrowserContext, type Page, chromium } from "playwright-core";
import { onCleanup } from "./cleanup";
import { REPO_ROOT } from "./programs";

export const CHROMIUM = "/usr/bin/chromium";
export const LAPTOP = { width: 1280, height: 800 };
export const PHONE = { width: 375, height: 740 };

const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

export interface Session {
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** Text of every response the page received, in order (bodies of fetches, documents, streams). */
  bodies: string[];
  /** Console errors and page errors (a CSP refusal shows up here). */
  consoleErrors: string[];
  shots: string[];
}

/** One browser for a test file (cleaned up with the file). */
export async function launchBrowser(baseUrl: string): Promise<Session> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // root in a container: chromium's sandbox needs user namespaces it may not have.
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
  onCleanup(() => browser.close());
  const context = await browser.newContext({ baseURL: baseUrl, viewport: LAPTOP, deviceScaleFactor: 1 });
  // Every page of the context, those a test opens later too.
  context.on("page", retryNavigationCutByNetworkChange);
  const page = await context.newPage();
  retryNavigationCutByNetworkChange(page);
  const bodies: string[] = [];
  const consoleErrors: string[] = [];
  page.on("response", async (res) => {
    // An EventSource stream ends when the deployment ends; its body is read then.
    try {
      bodies.push(await res.text());
    } catch {
      // a redirect or an aborted load has no body
    }
  });
  page.on("console", (m) => {
    // A refused API call is logged by the browser too; the page shows its detail itself.
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) consoleErrors.push(m.text());
  });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  return { browser, context, page, bodies, consoleErrors, shots: [] };
}

/**
 * Chromium aborts a navigation in flight when a network interface comes or goes
 * (net::ERR_NETWORK_CHANGED): on a CI machine, another test file's podman container
 * adding its veth. That is the machine, not the dashboard (whose own loads are asked
 * again after such a cut: dashboard-apps tests it), and a person would load the page
 * again: so does page.goto here, at most twice more, for that error only.
 */
const retrying = new WeakSet<Page>();
function retryNavigationCutByNetworkChange(page: Page): void {
  if (retrying.has(page)) return;
  retrying.add(page);
  const goto = page.goto.bind(page);
  page.goto = async (url, options) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await goto(url, options);
      } catch (err) {
        if (attempt >= 3 || !String((err as Error).message).includes("net::ERR_NETWORK_CHANGED")) throw err;
      }
    }
  };
}

/** axe-core's serious and critical violations on the page as it is now. */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  // evaluate() is not subject to the page's CSP, which refuses inline scripts.
  if (!(await page.evaluate("typeof window.axe === 'object'"))) await page.evaluate(AXE_SOURCE);
  const result = (await page.evaluate("window.axe.run(document, { resultTypes: ['violations'] })")) as {
    violations: AxeViolation[];
  };
  return result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
}

export function describeViolations(vs: AxeViolation[]): string {
  return vs
    .map((v) => `${v.impact} ${v.id}: ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`)
    .join("\n");
}

/**
 * Saves a screenshot as <dir>/<name>.png: the viewport, or with fullPage the whole page
 * (a phone's page is a tall column; its viewport alone would show the filters, not the list).
 */
export async function screenshot(s: Session, dir: string, name: string, fullPage = false): Promise<void> {
  const file = join(dir, `${name}.png`);
  await s.page.screenshot({ path: file, fullPage });
  s.shots.push(file);
}

/** Copies the screenshots of this run to docs/screenshots/ (the set the README shows). */
export function publishScreenshots(s: Session): void {
  const out = join(REPO_ROOT, "docs/screenshots");
  mkdirSync(out, { recursive: true });
  for (const file of s.shots) copyFileSync(file, join(out, file.split("/").pop()!));
}
