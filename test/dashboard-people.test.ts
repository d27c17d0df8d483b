// Sign-in pages, people and keys (issue 31, defects 10 and 11) in real Chromium
// against a real cluster (api, gateway, agent, NATS, MariaDB) without the GitHub
// App: /login, /invite, /device and the OAuth authorize page wear the dashboard's
// stylesheet (served, under a CSP without inline style) with a viewport meta tag
// and pass axe at laptop and phone width; a failed sign-in keeps the e-mail typed;
// pending invites are listed on Members and revocable (the link then fails);
// sessions show the browser and their last use; keys show when they were last
// used; an automation key's operations must be chosen ("All operations" or some);
// and a control plane without the GitHub App says so once at boot, not a stack
// trace per request, shows owners what to set and nobody an error.
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
import { type Cluster, startCluster } from "./harness/cluster";
import { type Dash, inviteMember, signInDash } from "./harness/dashboard-session";
import { api, request } from "./harness/http";
import { Browser, type Person, createOwner } from "./harness/people";
import { pollUntil } from "./harness/wait";

let c: Cluster;
let owner: Person;
let dash: Dash;
let b: Session;
let page: Page;
let inviteUrl: string;
let inviteEmail: string;
const uniq = (p: string) => `${p}-${Math.random().toString(36).slice(2, 8)}`;

test.before(async () => {
  c = await startCluster();
  owner = await createOwner(c.db.url, c.tenantId);
  dash = await signInDash(c.baseUrl, owner);
  inviteEmail = `${uniq("invitee")}@example.test`;
  const inv = await dash.call("POST", "/api/users/invites", { email: inviteEmail, role: "viewer" });
  if (inv.status !== 201) throw new Error(`invite: ${inv.status} ${inv.text}`);
  inviteUrl = new URL(String(inv.json.invite_url)).pathname;
  b = await launchBrowser(c.baseUrl);
  page = b.page;
});
test.after.always(cleanupAll);

type T = ExecutionContext;

/**
 * A server-rendered page as shown now: the viewport meta tag, the dashboard's
 * stylesheet linked and served, its look applied (the primary button in the
 * accent colour, the form in a card), no inline style allowed by the CSP and
 * none refused, axe clean and no sideways scrolling at both widths.
 */
async function styledPage(t: T, name: string, csp: string) {
  t.notRegex(csp, /unsafe-inline/, `${name}: CSP`);
  t.regex(csp, /style-src 'self'/, `${name}: CSP`);
  t.is(
    await page.locator('meta[name="viewport"]').getAttribute("content"),
    "width=device-width, initial-scale=1",
    `${name}: viewport meta`,
  );
  const href = await page.locator('link[rel="stylesheet"]').getAttribute("href");
  t.regex(href ?? "", /^\/app\/assets\/app-\w+\.css$/, `${name}: stylesheet`);
  const sheet = await page.request.get(href!);
  t.is(sheet.status(), 200, `${name}: stylesheet served`);
  t.regex(sheet.headers()["content-type"] ?? "", /text\/css/);
  // A string: the test's TypeScript has no DOM types; it runs in the page.
  const look = (await page.evaluate(`(() => {
    const card = document.querySelector(".card");
    const button = document.querySelector("button.primary") ?? document.querySelector("button");
    return {
      card: card ? getComputedStyle(card).backgroundColor : null,
      cardBorder: card ? getComputedStyle(card).borderTopStyle : null,
      button: button ? getComputedStyle(button).borderRadius : null,
      font: getComputedStyle(document.body).fontFamily,
    };
  })()`)) as { card: string | null; cardBorder: string | null; button: string | null; font: string };
  t.is(look.card, "rgb(255, 255, 255)", `${name}: the content sits in a card`);
  t.is(look.cardBorder, "solid", `${name}: the card has its border`);
  t.regex(look.font, /system-ui/, `${name}: the dashboard's font`);
  if (look.button !== null) t.is(look.button, "6px", `${name}: dashboard buttons`);
  for (const size of [LAPTOP, PHONE]) {
    await page.setViewportSize(size);
    const violations = await axeViolations(page);
    t.deepEqual(violations, [], `${name} at ${size.width}px: ${describeViolations(violations)}`);
    const overflow = (await page.evaluate(
      "document.documentElement.scrollWidth - window.innerWidth",
    )) as number;
    t.true(overflow <= 0, `${name} at ${size.width}px scrolls sideways by ${overflow}px`);
  }
  await page.setViewportSize(LAPTOP);
  t.deepEqual(
    b.consoleErrors.filter((e) => /Content Security Policy/i.test(e)),
    [],
    `${name}: nothing refused by the CSP`,
  );
}

async function styledAt(t: T, path: string, name: string, heading: string | RegExp) {
  const res = await page.goto(path);
  await page.getByRole("heading", { level: 1, name: heading }).waitFor();
  await styledPage(t, name, res?.headers()["content-security-policy"] ?? "");
  return res;
}

test.serial(
  "people - /login and /invite are styled, and a failed sign-in keeps the e-mail typed",
  async (t) => {
    await styledAt(t, "/login", "login", "Sign in");
    await styledAt(t, inviteUrl, "invite", "Join relayctl");

    await page.goto("/login?next=/app/");
    await page.getByLabel("E-mail").fill(owner.email);
    await page.getByLabel("Password").fill("not-the-password");
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith("/login") && r.request().method() === "POST"),
      page.getByRole("button", { name: "Sign in" }).click(),
    ]);
    t.is(answer.status(), 401);
    await page.getByRole("alert").filter({ hasText: "Wrong e-mail or password." }).waitFor();
    t.is(await page.getByLabel("E-mail").inputValue(), owner.email, "the e-mail is kept");
    t.is(await page.getByLabel("Password").inputValue(), "", "the password is not");
    await styledPage(t, "login after a failure", answer.headers()["content-security-policy"] ?? "");

    // The second try needs only the password; it signs in and goes on.
    await page.getByLabel("Password").fill(owner.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(/\/app\/$/);
  },
);

test.serial("people - /device and the OAuth authorize page are styled", async (t) => {
  await styledAt(t, "/device", "device", "Connect a device");
  await page.getByLabel("Code shown by your device").fill("WRONG-CODE");
  const [answer] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith("/device") && r.request().method() === "POST"),
    page.getByRole("button", { name: "Continue" }).click(),
  ]);
  t.is(answer.status(), 404);
  await page.getByRole("alert").filter({ hasText: "unknown or has expired" }).waitFor();
  await styledPage(t, "device with an error", answer.headers()["content-security-policy"] ?? "");
  await styledAt(
    t,
    "/oauth/authorize?response_type=code&client_id=no-such-client",
    "authorize refused",
    "Sign-in request refused",
  );
});

test.serial("people - Members lists pending invites and revokes one; its link then fails", async (t) => {
  await page.goto("/app/members");
  const pending = page.getByRole("region", { name: "Pending invites" });
  const row = pending.locator("tr", { hasText: inviteEmail });
  await row.waitFor();
  const text = await row.innerText();
  t.regex(text, /viewer/);
  t.regex(text, new RegExp(owner.email.replace(/\./g, "\\.")), "invited by names the owner");
  t.regex(text, /in 7 days|in 6 days|in \d+ d/, `expires: ${text}`);

  // An invite made here shows up in the list at once.
  const second = `${uniq("second")}@example.test`;
  await page.getByLabel("E-mail").fill(second);
  await page.getByRole("button", { name: "Create invite link" }).click();
  await pending.locator("tr", { hasText: second }).waitFor();
  await page.getByRole("button", { name: "Done" }).click();

  for (const size of [LAPTOP, PHONE]) {
    await page.setViewportSize(size);
    const violations = await axeViolations(page);
    t.deepEqual(violations, [], `members at ${size.width}px: ${describeViolations(violations)}`);
  }
  await page.setViewportSize(LAPTOP);

  await row.getByRole("button", { name: "Revoke" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Revoke invite" }).click();
  await row.waitFor({ state: "detached" });
  t.true(await pending.locator("tr", { hasText: second }).isVisible(), "the other invite stays");

  const link = await new Browser(c.baseUrl).get(inviteUrl);
  t.is(link.status, 404, "a revoked invite's link is refused");
  const accept = await new Browser(c.baseUrl).post(inviteUrl, { password: "a-long-enough-password" });
  t.is(accept.status, 404, "and cannot create the account");
  const listed = await dash.call("GET", "/api/users/invites");
  t.is(listed.status, 200);
  const emails = (listed.json.invites as { email: string }[]).map((i) => i.email);
  t.false(emails.includes(inviteEmail));
  t.true(emails.includes(second));
  const audit = await dash.call("GET", "/api/audit?event_type=user.invite_revoked");
  t.true(
    JSON.stringify(audit.json).includes(inviteEmail),
    `the revocation is audited: ${audit.text.slice(0, 300)}`,
  );
  const again = await dash.call(
    "DELETE",
    `/api/users/invites/${(listed.json.invites as { id: string }[])[0]!.id}`,
  );
  t.is(again.status, 204);
  const gone = await dash.call(
    "DELETE",
    `/api/users/invites/${(listed.json.invites as { id: string }[])[0]!.id}`,
  );
  t.is(gone.status, 404);
  t.truthy(gone.json.detail);
  t.is((await dash.call("DELETE", "/api/users/invites/not-a-uuid")).status, 404);
});

test.serial("people - Account shows each session's browser and last use", async (t) => {
  await page.goto("/app/account");
  const sessions = page.getByRole("list", { name: "Browser sessions" });
  const mine = sessions.locator("li", { hasText: "(this browser)" });
  await mine.waitFor();
  const text = await mine.innerText();
  t.regex(text, /Headless Chrome on Linux/, text);
  t.regex(text, /last used (just now|\d+ (s|sec|min) ago)/i, text);
  const me = await dash.call("GET", "/api/me/sessions");
  const rows = me.json.sessions as { device: string | null; last_used_at: string; current: boolean }[];
  const browserRow = rows.find((s) => s.device === "Headless Chrome on Linux");
  t.truthy(browserRow, JSON.stringify(rows));
  t.true(Date.now() - Date.parse(browserRow!.last_used_at) < 120_000, "used just now");
  for (const size of [LAPTOP, PHONE]) {
    await page.setViewportSize(size);
    const violations = await axeViolations(page);
    t.deepEqual(violations, [], `account at ${size.width}px: ${describeViolations(violations)}`);
  }
  await page.setViewportSize(LAPTOP);
});

test.serial("people - keys show when they were last used", async (t) => {
  const name = uniq("used-key");
  const made = await dash.call("POST", "/api/api-keys", { name });
  t.is(made.status, 201);
  const keyRow = async () =>
    (
      (await dash.call("GET", "/api/api-keys")).json.api_keys as {
        name: string;
        last_used_at: string | null;
      }[]
    ).find((k) => k.name === name);
  t.is((await keyRow())?.last_used_at, null, "never used yet");
  const used = await request({ baseUrl: c.baseUrl }, "/api/servers", {
    key: null,
    headers: { "x-api-key": String(made.json.key) },
  });
  t.is(used.status, 200);
  await pollUntil(async () => ((await keyRow())?.last_used_at ? true : undefined), {
    what: "the API key's last use",
    timeoutMs: 10_000,
    intervalMs: 100,
  });
  await page.goto("/app/keys");
  const apiRow = page.locator("tr", { has: page.locator("th", { hasText: name }) });
  await apiRow.waitFor();
  t.notRegex(await apiRow.locator("td").nth(1).innerText(), /never/, "API key: last used is shown");

  const auto = await dash.call("POST", "/api/automation-keys", { name: uniq("auto"), operations: [] });
  t.is(auto.status, 201);
  const autoName = String(auto.json.name);
  const autoRow = async () =>
    (
      (await dash.call("GET", "/api/automation-keys")).json.automation_keys as {
        name: string;
        last_used_at: string | null;
      }[]
    ).find((k) => k.name === autoName);
  t.is((await autoRow())?.last_used_at, null);
  t.is((await api(c, "/operations?run_id=last-use", { key: String(auto.json.key) })).status, 200);
  await pollUntil(async () => ((await autoRow())?.last_used_at ? true : undefined), {
    what: "the automation key's last use",
    timeoutMs: 10_000,
    intervalMs: 100,
  });
  await page.goto("/app/keys/automation");
  const row = page.locator("tr", { has: page.locator("th", { hasText: autoName }) });
  await row.waitFor();
  const cells = await row.locator("td").allInnerTexts();
  t.regex(cells.at(-2) ?? "", /just now|ago/, `automation key: last used is shown: ${cells.join(" | ")}`);
});

test.serial(
  "people - an automation key's operations are chosen: none ticked is refused until All operations or some",
  async (t) => {
    await page.goto("/app/keys/automation");
    const form = page.getByRole("form", { name: "New automation key" });
    const name = uniq("chosen");
    const names = async () =>
      ((await dash.call("GET", "/api/automation-keys")).json.automation_keys as { name: string }[]).map(
        (k) => k.name,
      );
    await form.getByLabel("Name").fill(name);
    await form.getByRole("button", { name: "Create automation key" }).click();
    await form.getByRole("alert").filter({ hasText: "Choose which operations" }).waitFor();
    t.false((await names()).includes(name), "nothing was created");

    await form.getByLabel(/Only the operations ticked below/).check();
    await form.getByRole("button", { name: "Create automation key" }).click();
    await form.getByRole("alert").filter({ hasText: "Tick at least one operation" }).waitFor();
    t.false((await names()).includes(name));

    for (const size of [LAPTOP, PHONE]) {
      await page.setViewportSize(size);
      const violations = await axeViolations(page);
      t.deepEqual(violations, [], `keys at ${size.width}px: ${describeViolations(violations)}`);
    }
    await page.setViewportSize(LAPTOP);

    await form.getByLabel("exec", { exact: true }).check();
    await form.getByRole("button", { name: "Create automation key" }).click();
    await page.getByLabel("Automation key", { exact: true }).waitFor();
    const made = (
      (await dash.call("GET", "/api/automation-keys")).json.automation_keys as {
        name: string;
        operations: string[];
      }[]
    ).find((k) => k.name === name);
    t.deepEqual(made?.operations, ["exec"]);
    await page.getByRole("button", { name: "Done" }).click();

    const all = uniq("all-ops");
    await form.getByLabel("Name").fill(all);
    await form.getByLabel(/All operations/).check();
    await form.getByRole("button", { name: "Create automation key" }).click();
    await page.getByLabel("Automation key", { exact: true }).waitFor();
    const allKey = (
      (await dash.call("GET", "/api/automation-keys")).json.automation_keys as {
        name: string;
        operations: string[];
      }[]
    ).find((k) => k.name === all);
    t.deepEqual(allKey?.operations, [], "All operations is the API's empty list");
  },
);

test.serial(
  "people - without the GitHub App: said once at boot, no stack per request, owners told what to set, others no error",
  async (t) => {
    const app = await dash.call("POST", "/api/applications", {
      name: uniq("no-github"),
      server_id: c.serverId,
      linked_container_name: "no-github-web",
      container_port: 8080,
      git_repository: "https://git.example.invalid/acme/no-github.git",
    });
    t.is(app.status, 201, app.text);
    const appPath = `/app/applications/${app.json.id}`;

    // The owner: the GitHub section says what is not configured, in words, not as an error.
    for (let i = 0; i < 3; i++) {
      await page.goto(appPath);
      await page.getByRole("heading", { level: 1 }).waitFor();
    }
    await page.getByText("GitHub repository", { exact: true }).click();
    const section = page.locator("details", { hasText: "GitHub repository" });
    await section.getByText("RELAYCTL_GITHUB_APP_ID").waitFor();
    // Their texts, not a count: a failure says which note it was.
    t.deepEqual(
      await section.locator(".error, [role=alert]").allTextContents(),
      [],
      "no error shown to the owner",
    );
    t.deepEqual(await page.locator(".error, [role=alert]").allTextContents(), []);
    const status = await dash.call("GET", "/api/github/app");
    t.is(status.status, 200);
    t.is(status.json.configured, false);

    // A deployer: nothing about a configuration, no error, on the same page.
    const deployer = await inviteMember(dash, "deployer");
    const asDeployer = await deployer.call("GET", "/api/github/app");
    t.deepEqual(asDeployer.json, { configured: false }, "the settings are for owners");
    const other = await b.browser.newContext({ baseURL: c.baseUrl, viewport: PHONE });
    const dp = await other.newPage();
    await dp.context().addCookies([
      {
        name: "relayctl_session",
        value: deployer.sessionToken,
        url: c.baseUrl,
      },
    ]);
    for (let i = 0; i < 3; i++) {
      await dp.goto(appPath);
      await dp.getByRole("heading", { level: 1 }).waitFor();
      await dp.locator(".loading").first().waitFor({ state: "detached" });
    }
    const shown = await dp.locator("main").innerText();
    t.notRegex(shown, /not configured|GITHUB_|GitHub App/i, "a deployer sees no configuration error");
    t.is(await dp.locator(".error, [role=alert]").count(), 0);
    await other.close();

    // The API still answers 503 with its detail, but the log does not take a stack per request.
    for (let i = 0; i < 5; i++) {
      const r = await dash.call("GET", "/api/github/installations");
      t.is(r.status, 503);
      t.regex(String(r.json.detail), /GitHub App is not configured/);
    }
    // A line logged after those requests: once it is in the log, theirs would be too.
    const marker = `${uniq("nobody")}@example.test`;
    await new Browser(c.baseUrl).signIn({ email: marker, password: "wrong-password-here" });
    const log = await pollUntil(
      () => (c.logText().includes("sign-in failed for an unknown e-mail") ? c.logText() : undefined),
      { what: "the marker line in the api's log", timeoutMs: 10_000, intervalMs: 100 },
    );
    t.notRegex(log, /RC_ERR_GITHUB_UNCONFIGURED/, "no error logged per request");
    const boot = log.split("\n").filter((l) => l.includes("GitHub App not configured"));
    t.is(boot.length, c.apis.length, `said once per api process at boot:\n${boot.join("\n")}`);
    t.notRegex(boot.join("\n"), /"stack"/);
  },
);

test.serial(
  "pages - a read the network cut is asked again and shown; a change it cut is said, not sent twice",
  async (t) => {
    const kept = `${uniq("kept")}@example.test`;
    const made = await dash.call("POST", "/api/users/invites", { email: kept, role: "viewer" });
    t.is(made.status, 201, made.text);
    // The network cuts the page's first read of the invites and its first invite sent, as a
    // laptop changing networks cuts the requests in flight.
    const sent = { GET: 0, POST: 0 };
    const cut = new Set(["GET", "POST"]);
    await page.route("**/api/users/invites", async (route) => {
      const method = route.request().method() as keyof typeof sent;
      sent[method] += 1;
      if (cut.delete(method)) return route.abort("internetdisconnected");
      return route.continue();
    });
    try {
      await page.goto("/app/members");
      await page.getByRole("region", { name: "Pending invites" }).locator("tr", { hasText: kept }).waitFor();
      t.is(sent.GET, 2, "the read was asked again once");
      t.deepEqual(await page.locator(".error, [role=alert]").allTextContents(), [], "and no error shown");

      const lost = `${uniq("lost")}@example.test`;
      await page.getByLabel("E-mail").fill(lost);
      await page.getByRole("button", { name: "Create invite link" }).click();
      await page.getByText("The control plane cannot be reached").waitFor();
      t.is(sent.POST, 1, "a change is never sent again by the page");
      const invites = await dash.call("GET", "/api/users/invites");
      t.false(invites.text.includes(lost), "nothing was made");
      t.is(await page.getByLabel("E-mail").inputValue(), lost, "the form keeps what was typed");
    } finally {
      await page.unroute("**/api/users/invites");
    }
  },
);
