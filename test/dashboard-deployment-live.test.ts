// The deployment page while a deploy runs (issue 31, defects 2 and 3), in real
// Chromium against a whole installation that deploys for real (deploy-stack).
// The build prints long lines in pieces a moment apart (harness/chunky-build.ts),
// so the agent reads chunks that end mid-line, for several seconds. Opened
// while it runs, the page's steps change without a reload, its badge and its
// log's header agree, the log box keeps its end in view unless the person
// scrolls up (and follows again back at the end), every line arrives whole, and
// at the end no step is left running (retire, which ends after the result).
// The application's Logs box follows its end the same way.
import test, { type ExecutionContext } from "ava";
import type { Locator, Page } from "playwright-core";
import { LAPTOP, PHONE, axeViolations, describeViolations, launchBrowser } from "./harness/browser";
import { cleanupAll } from "./harness/cleanup";
import { CHUNKY_START, chunkyLine, commitChunkyBuild } from "./harness/chunky-build";
import { type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { type Person, createOwner } from "./harness/people";
import { pollUntil } from "./harness/wait";

const DEPLOY_MS = 150_000;
/** Lines the build prints, ~45 ms each: about 9 s of build output. */
const LINES = 200;

let s: DeployStack;
let repo: AppRepo;
let owner: Person;
let page: Page;

test.before(async () => {
  [repo, s] = await Promise.all([createAppRepo({ first: "live" }), startDeployStack()]);
  await commitChunkyBuild(repo, LINES);
  owner = await createOwner(s.c.db.url, s.c.tenantId);
  page = (await launchBrowser(s.c.baseUrl)).page;
  // Signed out, / leads to the sign-in page, and back to the dashboard after it.
  await page.goto("/");
  await page.getByLabel("E-mail").fill(owner.email);
  await page.getByLabel("Password").fill(owner.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/app\/$/);
});
test.after.always(cleanupAll);

/** What the page shows now, read in one go (badge, log header, steps as name:status). */
async function shown() {
  // No function is declared inside: tsx's __name helper does not exist in the page.
  const now = await page.locator("body").evaluate((body) => ({
    badge: body.querySelector('[data-testid="deployment-status"]')?.textContent ?? null,
    note: body.querySelector('[data-testid="live-state"]')?.textContent ?? null,
    steps: [...body.querySelectorAll("[data-step]")].map(
      (e) => `${e.getAttribute("data-step")}:${e.getAttribute("data-status")}`,
    ),
  }));
  return { ...now, sameLoad: (await page.evaluate("window.sameLoad === true")) as boolean };
}

const BOX = '[data-testid="live-log"]';
const box = () => page.locator(BOX);

/** How far a log box has got: build lines in the deployment's, the last tick in the application's. */
const progressOf = (log: Locator) =>
  log.evaluate((el) => {
    const text = el.textContent ?? "";
    const tick = /tick (\d+)\s*$/.exec(text);
    return tick ? Number(tick[1]) : (text.match(/LINE \d{3}:/g) ?? []).length;
  });

/** Waits until `more` lines beyond those shown now have arrived in a log box. */
async function moreLines(log: Locator, more: number) {
  const want = (await progressOf(log)) + more;
  await pollUntil(async () => ((await progressOf(log)) >= want ? true : undefined), {
    what: `${more} more lines in the log box`,
    timeoutMs: 30_000,
    intervalMs: 50,
  });
}

const atEnd = (log: Locator) => log.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight < 8);

/** Scrolls a log box as a person would, to the top or to the end. */
const scrollLog = (log: Locator, to: "top" | "end") =>
  log.evaluate((el, where) => {
    el.scrollTop = where === "top" ? 0 : el.scrollHeight;
    el.dispatchEvent(new Event("scroll"));
  }, to);

/** A log box past its height, keeping its end in view; scrolled up, it stays; back at the end, it follows. */
async function checkFollows(t: ExecutionContext, log: Locator) {
  await pollUntil(
    async () => (await log.evaluate((el) => el.scrollHeight > el.clientHeight + 100)) || undefined,
    {
      what: "the log past its box's height",
      timeoutMs: 60_000,
      intervalMs: 50,
    },
  );
  await moreLines(log, 5);
  t.true(await atEnd(log), "the log box followed its end");
  // Scrolled up to read: new lines do not pull the box away.
  await scrollLog(log, "top");
  await moreLines(log, 5);
  t.is(await log.evaluate((el) => el.scrollTop), 0, "the box stayed where the person reads");
  // Back at the end: it follows again.
  await scrollLog(log, "end");
  await moreLines(log, 5);
  t.true(await atEnd(log), "back at the end, the box follows again");
}

/** The lines of a text that hold a piece of a build line, and whether each is whole. */
function buildLines(text: string) {
  // The engine's echo of the RUN instruction holds the pieces too: it is not output.
  const pieces = text.split("\n").filter((l) => /a{20}|b{20}|c{20}/.test(l) && !l.startsWith("STEP "));
  return {
    whole: pieces.filter((l) => CHUNKY_START.test(l)),
    cut: pieces.filter((l) => !CHUNKY_START.test(l)),
  };
}

const EVERY_LINE = Array.from({ length: LINES }, (_, i) => chunkyLine(i));

test.serial(
  "deployment page - steps, badge and log follow one live stream; whole lines; the box follows the end",
  async (t) => {
    const app = await s.createApp({}, repo);
    const started = await s.dashboardDeploy(app.id);
    t.is(started.status, 202, started.text);
    const id = String(started.json.deployment_id);
    await page.goto(`/app/applications/${app.id}/deployments/${id}`);
    await page.getByRole("heading", { level: 1, name: "Deployment" }).waitFor();
    // Set once on this load: still there at the end means nothing reloaded the page.
    await page.evaluate("window.sameLoad = true");

    // While the build runs: the steps so far, and the badge and the header agree it runs.
    await page.locator('[data-step="build"][data-status="running"]').waitFor({ timeout: DEPLOY_MS });
    const during = await shown();
    t.is(during.badge, "running", JSON.stringify(during));
    t.is(during.note, "following…", JSON.stringify(during));
    t.true(during.steps.includes("fetch:succeeded"), JSON.stringify(during));
    t.false(
      during.steps.some((x) => /^(start|health_check|switch|retire):/.test(x)),
      JSON.stringify(during),
    );

    // The box fills past its height and keeps its end in view as lines come, unless scrolled up.
    await checkFollows(t, box());

    // The steps went on without a reload, to the end: retire too, after the result.
    await page
      .getByTestId("live-state")
      .getByText(/^(completed|failed|timeout)$/)
      .waitFor({ timeout: DEPLOY_MS });
    const after = await shown();
    t.is(after.badge, "completed", JSON.stringify(after));
    t.is(after.note, "completed", "the log's header says what the badge says");
    t.true(after.sameLoad, "the page was not reloaded");
    t.deepEqual(after.steps, [
      "fetch:succeeded",
      "build:succeeded",
      "start:succeeded",
      "health_check:succeeded",
      "switch:succeeded",
      "retire:succeeded",
    ]);

    // Every build line whole, in order, in the live log and in the build step's log.
    const live = buildLines((await box().textContent()) ?? "");
    t.deepEqual(live.cut, [], "no line of the live log is a piece of a build line");
    t.deepEqual(live.whole, EVERY_LINE);
    const step = buildLines((await page.locator('[data-step="build"] pre').textContent()) ?? "");
    t.deepEqual(step.cut, []);
    t.deepEqual(step.whole, EVERY_LINE);

    // No serious or critical axe finding, at a laptop's width and a phone's.
    for (const size of [LAPTOP, PHONE]) {
      await page.setViewportSize(size);
      const violations = await axeViolations(page);
      t.deepEqual(violations, [], `${size.width}px: ${describeViolations(violations)}`);
    }
    await page.setViewportSize(LAPTOP);

    // Opened again once over: the stored steps, none running, and the same badge.
    await page.reload();
    await page.locator('[data-step="retire"]').waitFor();
    const again = await shown();
    t.is(again.badge, "completed");
    t.false(
      again.steps.some((x) => x.endsWith(":running")),
      JSON.stringify(again),
    );
    const stored = buildLines((await page.locator('[data-step="build"] pre').textContent()) ?? "");
    t.deepEqual(stored.whole, EVERY_LINE);
  },
);

test.serial(
  "application logs - the Logs box follows its end unless scrolled up, and again back at the end",
  async (t) => {
    // An application that prints a line every 40 ms while it serves.
    const talky = await createAppRepo({ first: "talky" });
    await talky.commitCommand("talky", [
      "sh",
      "-c",
      '(i=0; while true; do echo "tick $i"; i=$((i+1)); usleep 40000; done) & exec httpd -f -p 8080 -h /www',
    ]);
    const app = await s.createApp({}, talky);
    const d = await s.deployAndWait(app.id);
    t.is(d.op.json.status, "completed", d.op.text);
    await page.goto(`/app/applications/${app.id}`);
    await page.getByRole("heading", { level: 1, name: app.name }).waitFor();
    await page
      .locator("details", { has: page.getByRole("heading", { name: "Logs" }) })
      .locator("summary")
      .click();
    await checkFollows(t, page.getByTestId("app-logs"));
  },
);
