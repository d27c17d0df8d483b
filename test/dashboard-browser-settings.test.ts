// The dashboard's settings in a real browser (set-up shared with dashboard-browser.test.ts in
// harness/dashboard-browser.ts: Debian's chromium, headless, against a whole installation): an
// API key shown once and revoked, a registry password that never comes back, another browser's
// session revoked from the Account page, a member invited by a link shown once, and Sign out.
// Every page passes axe-core and is screenshotted at laptop and at phone width, and no script
// error or CSP refusal reaches the console. The owner is signed in on /login before the tests,
// which run in order in one browser.
import { randomBytes } from "node:crypto";
import test from "ava";
import { onCleanup } from "./harness/cleanup";
import { b, checkPage, dashboardBrowser, open, owner, page, row, s, uniq } from "./harness/dashboard-browser";
import { request } from "./harness/http";

dashboardBrowser(test, { signedIn: true });

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
