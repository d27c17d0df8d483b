// The Activity page's outcomes and the Audit log page (issue 31, defects 5 and 9) in
// real Chromium against a real cluster (api, gateway, agent, NATS, MariaDB): a command
// that exited non-zero gets the "exited N" failure badge, not a green "completed", and
// the run summary counts both ("3 succeeded, 1 exited 1"); the audit log lists every
// event newest first with its actor on every row (sign-ins, keys, members, application
// settings, operations), filters by kind, actor, server, application and dates, and
// links a deploy operation to its deployment. axe finds nothing serious at laptop and
// phone width. The API underneath (GET /api/audit order=desc and its filters) is
// asserted directly too.
import test from "ava";
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
} from "./harness/browser";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type Dash, inviteMember, signInDash } from "./harness/dashboard-session";
import { api } from "./harness/http";
import { type Person, createOwner } from "./harness/people";
import { pollUntil } from "./harness/wait";

let c: Cluster;
let owner: Person;
let dash: Dash;
let b: Session;
let page: Page;
let appId: string;
let appName: string;
let deploymentId: string;
let apiKeyId: string;
let shots: string;
let allPassed = true;
const RUN = `audit-run-${Math.random().toString(36).slice(2, 8)}`;

interface Row {
  seq: number;
  event_type: string;
  server_id: string | null;
  created_at: string;
  payload: Record<string, unknown>;
  actor: { type: string; id: string | null; name: string };
}

async function audit(query: Record<string, string>): Promise<Row[]> {
  const r = await dash.call("GET", `/api/audit?${new URLSearchParams(query)}`);
  if (r.status !== 200) throw new Error(`GET /api/audit: ${r.status} ${r.text}`);
  return r.json.events as Row[];
}

test.before(async () => {
  c = await startCluster();
  owner = await createOwner(c.db.url, c.tenantId);
  dash = await signInDash(c.baseUrl, owner);
  // A run of four commands, one of which exits 1: a non-zero exit is still `completed`.
  for (const command of ["true", "echo two", "exit 1", "echo four"]) {
    const r = await api(c, "/exec", {
      method: "POST",
      body: { server_id: c.serverId, command, run_id: RUN },
    });
    if (r.status !== 200) throw new Error(`exec: ${r.status} ${r.text}`);
  }
  // Keys, members, an application's settings and a deploy: events with a person as actor.
  const key = await dash.call("POST", "/api/api-keys", { name: "audit-page-key" });
  apiKeyId = String(key.json.id);
  await inviteMember(dash, "deployer");
  appName = `audited-${Math.random().toString(36).slice(2, 8)}`;
  const app = await dash.call("POST", "/api/applications", {
    name: appName,
    server_id: c.serverId,
    linked_container_name: "audited-web",
    container_port: 8080,
    git_repository: "https://git.example.invalid/acme/audited.git",
  });
  if (app.status !== 201) throw new Error(`create app: ${app.status} ${app.text}`);
  appId = String(app.json.id);
  const patched = await dash.call("PATCH", `/api/applications/${appId}`, { container_port: 8081 });
  if (patched.status !== 200) throw new Error(`patch app: ${patched.status} ${patched.text}`);
  const d = await dash.call("POST", `/api/tenants/${c.tenantId}/applications/${appId}/deploy`, {});
  if (d.status !== 202) throw new Error(`deploy: ${d.status} ${d.text}`);
  deploymentId = String(d.json.deployment_id);
  b = await launchBrowser(c.baseUrl);
  page = b.page;
  shots = makeTempDir("audit-shots");
  await page.goto("/app/activity");
  await page.getByLabel("E-mail").fill(owner.email);
  await page.getByLabel("Password").fill(owner.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/app\/activity$/);
});
// Only a run where every test passed replaces the screenshots the docs show (before cleanupAll).
test.afterEach.always((t) => {
  if (!t.passed) allPassed = false;
});
test.after(() => {
  if (allPassed) publishScreenshots(b);
});
test.after.always(cleanupAll);

/** No serious or critical axe violation at laptop and phone width; a screenshot at each when `shot` is named. */
async function noSeriousViolations(
  t: { deepEqual: (a: unknown, b: unknown, m?: string) => void },
  name: string,
  shot?: string,
) {
  for (const size of [LAPTOP, PHONE]) {
    await page.setViewportSize(size);
    const violations = await axeViolations(page);
    t.deepEqual(violations, [], `${name} at ${size.width}px: ${describeViolations(violations)}`);
    if (shot) await screenshot(b, shots, size === PHONE ? `${shot}-phone` : shot, size === PHONE);
  }
  await page.setViewportSize(LAPTOP);
}

test.serial("audit API - newest first with order=desc, filters, and an actor on every event", async (t) => {
  const newest = await audit({ order: "desc", limit: "1000" });
  const seqs = newest.map((e) => e.seq);
  t.deepEqual(
    seqs,
    [...seqs].sort((x, y) => y - x),
  );
  const oldest = await audit({ limit: "1000" });
  t.deepEqual(
    oldest.map((e) => e.seq),
    [...seqs].reverse(),
    "without order the chain order stays",
  );
  for (const e of newest) {
    t.truthy(e.actor?.name, `${e.event_type} #${e.seq} has an actor`);
    t.truthy(e.actor?.type, `${e.event_type} #${e.seq} has an actor type`);
  }
  const types = new Set(newest.map((e) => e.event_type));
  for (const type of [
    "auth.signin",
    "api_key.created",
    "user.invited",
    "user.created",
    "application.created",
    "operation.exec",
    "operation.deploy",
  ])
    t.true(types.has(type), `${type} is audited`);
  const byOwner = (e: Row) =>
    e.actor.type === "user" && e.actor.id === owner.id && e.actor.name === owner.email;
  t.true(newest.filter((e) => e.event_type === "api_key.created").every(byOwner));
  t.true(newest.filter((e) => e.event_type === "user.invited").every(byOwner));
  t.true(newest.filter((e) => e.event_type.startsWith("application.")).every(byOwner));
  // The invited person's acceptance names them, not nobody.
  const joined = newest.find((e) => e.event_type === "user.created");
  t.is(joined?.actor.type, "user");
  t.regex(joined?.actor.name ?? "", /^deployer-.*@example\.test$/);
  // The automation key's commands name the key.
  const execs = newest.filter((e) => e.event_type === "operation.exec");
  t.true(execs.length >= 4);
  t.true(execs.every((e) => e.actor.type === "automation_key" && e.actor.id === c.keyId));

  // Filters: a family, an exact type, several; the actor; the application; the server; time.
  const auth = await audit({ event_type: "auth", order: "desc" });
  t.true(auth.length >= 2);
  t.true(auth.every((e) => e.event_type.startsWith("auth.")));
  const two = await audit({ event_type: "api_key.created,user.invited", order: "desc" });
  t.deepEqual([...new Set(two.map((e) => e.event_type))].sort(), ["api_key.created", "user.invited"]);
  const mine = await audit({ actor: owner.id, order: "desc", limit: "1000" });
  t.true(mine.length > 0);
  t.true(mine.every(byOwner), "only what the owner did");
  // The key the owner created is mentioned by its creation, but it did not act: nothing of its own.
  t.deepEqual(await audit({ actor: apiKeyId }), []);
  const ofApp = await audit({ application_id: appId, order: "desc" });
  t.true(ofApp.length >= 3);
  t.true(ofApp.every((e) => e.payload.application_id === appId));
  t.true(ofApp.some((e) => e.event_type === "operation.deploy" && e.payload.deployment_id === deploymentId));
  const onServer = await audit({ server_id: c.serverId, limit: "1000" });
  t.true(onServer.length > 0);
  t.true(onServer.every((e) => e.server_id === c.serverId));
  const today = new Date().toISOString().slice(0, 10);
  const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
  t.is(
    (await audit({ until: today, limit: "1000" })).length,
    oldest.length,
    "until a date means its whole day",
  );
  t.deepEqual(await audit({ until: yesterday }), []);
  t.deepEqual(await audit({ since: new Date(Date.now() + 60_000).toISOString() }), []);
  // Pages newest first: the second starts below the first's last.
  const first = await dash.call("GET", "/api/audit?order=desc&limit=3");
  const next = await audit({ order: "desc", limit: "3", cursor: String(first.json.next_cursor) });
  t.deepEqual(
    [...(first.json.events as Row[]), ...next].map((e) => e.seq),
    seqs.slice(0, 6),
  );
  // Bad filters are a 422 with a detail.
  const bad = await dash.call("GET", "/api/audit?event_type=Auth%20x");
  t.is(bad.status, 422);
  t.regex(String(bad.json.detail), /^event_type: /);
  const badOrder = await dash.call("GET", "/api/audit?order=up");
  t.is(badOrder.status, 422);
});

test.serial(
  "activity - a non-zero exit gets the failure badge and the run summary counts both",
  async (t) => {
    await page.goto("/app/activity");
    await page.getByRole("heading", { level: 1, name: "Activity" }).waitFor();
    const run = page.locator("li", { has: page.getByRole("link", { name: RUN }) });
    const summary = run.getByTestId("run-summary");
    await summary.waitFor();
    t.is((await summary.innerText()).replace(/\s+/g, " ").trim(), "3 succeeded, 1 exited 1");
    t.is(await summary.locator(".badge-exited").innerText(), "exited 1");

    await run.getByRole("link", { name: RUN }).click();
    const table = page.getByTestId("operations");
    await table.waitFor();
    const failed = table.locator("tr", { hasText: "exit 1" });
    t.is(await failed.locator(".badge").innerText(), "exited 1");
    t.true(await failed.locator(".badge-exited").isVisible());
    const ok = table.locator("tr", { hasText: "echo two" });
    t.is(await ok.locator(".badge").innerText(), "succeeded");
    t.is(await table.locator(".badge-completed").count(), 0, "no operation of the run is a bare 'completed'");
    await noSeriousViolations(t, "activity of a run");

    // A deploy operation leads to its deployment.
    await page.goto("/app/activity?operation_type=deploy");
    await page.getByTestId("operations").getByRole("link", { name: "deploy" }).first().click();
    await page.waitForURL(new RegExp(`/app/applications/${appId}/deployments/${deploymentId}$`));
    await page.getByRole("heading", { level: 1, name: "Deployment" }).waitFor();
    t.pass();
  },
);

/** The audit table's rows as the page shows them. */
async function rows() {
  const table = page.getByTestId("audit-events");
  await table.waitFor();
  return table.locator("tbody tr").evaluateAll((trs) =>
    trs.map((tr) => ({
      seq: Number(tr.getAttribute("data-seq")),
      event: tr.getAttribute("data-event") ?? "",
      cells: [...tr.querySelectorAll("td, th")].map((td) =>
        (td.textContent ?? "").replace(/\s+/g, " ").trim(),
      ),
    })),
  );
}

/** The rows once every one of them satisfies `pred` (the page reloads after a filter). */
function rowsWhere(pred: (r: Awaited<ReturnType<typeof rows>>[number]) => boolean, what: string) {
  return pollUntil(
    async () => {
      const r = await rows();
      return r.length > 0 && r.every(pred) ? r : undefined;
    },
    { timeoutMs: 10_000, what },
  );
}

async function openAudit(query = "") {
  await page.goto(`/app/audit${query}`);
  await page.getByRole("heading", { level: 1, name: "Audit log" }).waitFor();
  await page.locator(".loading").first().waitFor({ state: "detached" });
}

test.serial("audit page - newest first, an actor on every row, sign-ins, keys and members", async (t) => {
  await page.goto("/app/activity");
  // Activity's own link to it (the navigation has one too).
  await page.getByRole("main").getByRole("link", { name: "Audit log" }).click();
  await page.getByRole("heading", { level: 1, name: "Audit log" }).waitFor();
  const all = await rows();
  t.true(all.length > 10);
  const seqs = all.map((r) => r.seq);
  t.deepEqual(
    seqs,
    [...seqs].sort((x, y) => y - x),
    "newest first",
  );
  // Columns: Time, Event, Actor, Server, Subject, Outcome.
  for (const r of all)
    t.regex(
      r.cells[2] ?? "",
      /\S+ \((person|automation key|API key|agent|relayctl|operator|OAuth token|GitHub|session)\)/,
      `#${r.seq} ${r.event}`,
    );
  const events = new Set(all.map((r) => r.event));
  for (const e of ["auth.signin", "api_key.created", "user.invited", "user.created", "application.created"])
    t.true(events.has(e), `${e} is listed`);
  const keyRow = all.find((r) => r.event === "api_key.created")!;
  t.is(keyRow.cells[2], `${owner.email} (person)`);
  t.is(keyRow.cells[4], "audit-page-key");
  // The failed command's outcome shows there too.
  t.true(all.some((r) => r.event === "operation.exec" && r.cells[5] === "exited 1"));
  await noSeriousViolations(t, "audit log", "audit-log");

  // Older pages on demand: 50 per page, then "Show older events".
  const more = page.getByRole("button", { name: "Show older events" });
  if (all.length === 50) {
    await more.click();
    await pollUntil(async () => ((await rows()).length > 50 ? true : undefined), {
      timeoutMs: 10_000,
      what: "older events",
    });
    const longer = (await rows()).map((r) => r.seq);
    t.deepEqual(
      longer,
      [...longer].sort((x, y) => y - x),
    );
  }
});

/** Runs `body` while /api/servers is held back (the real answer, released by `release`). */
async function withServersHeld(body: (release: () => void) => Promise<void>) {
  let release = () => {};
  const held = new Promise<void>((r) => {
    release = r;
  });
  await page.route("**/api/servers", async (route) => {
    await held;
    await route.continue();
  });
  try {
    await body(release);
  } finally {
    release();
    await page.unroute("**/api/servers");
  }
}

// The filters form renders again when the servers' list arrives; a kind chosen before
// that must still be the one "Show events" asks for (the select used to be set from the
// address on every render, so the choice went back to "any" and the address never changed).
test.serial("audit page - a kind chosen before the servers' list arrives is the one shown", async (t) => {
  await withServersHeld(async (release) => {
    await openAudit();
    const form = page.getByRole("form", { name: "Filter audit events" });
    await form.locator("select[name=event_type]").selectOption({ label: "Keys" });
    release();
    // The servers' options are there: the form has rendered with them.
    await form.locator("select[name=server_id] option").nth(1).waitFor({ state: "attached" });
    t.is(await form.locator("select[name=event_type]").inputValue(), "api_key,automation_key");
    await form.getByRole("button", { name: "Show events" }).click();
    await page.waitForURL(/event_type=api_key%2Cautomation_key/);
  });
});

test.serial("activity - a status chosen before the servers' list arrives is the one shown", async (t) => {
  await withServersHeld(async (release) => {
    await page.goto("/app/activity");
    const form = page.getByRole("form", { name: "Filter operations" });
    await form.locator("select[name=status]").selectOption("failed");
    release();
    // The servers' options are there: the form has rendered with them.
    await form.locator("select[name=server_id] option").nth(1).waitFor({ state: "attached" });
    t.is(await form.locator("select[name=status]").inputValue(), "failed");
    await form.getByRole("button", { name: "Show operations" }).click();
    await page.waitForURL(/status=failed/);
  });
});

test.serial("audit page - filters by kind, actor, server, application and dates", async (t) => {
  await openAudit();
  const form = page.getByRole("form", { name: "Filter audit events" });
  await form.locator("select[name=event_type]").selectOption({ label: "Sign-ins and sessions" });
  await form.getByRole("button", { name: "Show events" }).click();
  await page.waitForURL(/event_type=auth%2Coauth/);
  await rowsWhere((r) => /^(auth|oauth)\./.test(r.event), "sign-in events only");
  const signIns = await rows();
  t.true(signIns.some((r) => r.event === "auth.signin" && r.cells[2] === `${owner.email} (person)`));
  t.true(signIns.some((r) => r.event === "auth.signin" && /^deployer-/.test(r.cells[2] ?? "")));

  await openAudit("?event_type=user");
  const members = await rows();
  t.true(members.length >= 2);
  t.true(members.every((r) => r.event.startsWith("user.")));

  // The actor's name is a link to what they did.
  await openAudit("?event_type=api_key%2Cautomation_key");
  await page
    .getByTestId("audit-events")
    .getByRole("link", { name: `${owner.email} (person)` })
    .first()
    .click();
  await page.waitForURL(new RegExp(`actor=${owner.id}`));
  await rowsWhere((r) => r.cells[2] === `${owner.email} (person)`, "the owner's events only");
  const byOwner = await rows();
  t.true(byOwner.some((r) => r.event === "application.created"));
  t.false(
    byOwner.some((r) => r.event === "operation.exec"),
    "the key's commands are not the owner's",
  );

  await openAudit();
  await form.locator("select[name=server_id]").selectOption({ label: c.serverName });
  await form.getByRole("button", { name: "Show events" }).click();
  await page.waitForURL(new RegExp(`server_id=${c.serverId}`));
  await rowsWhere((r) => r.cells[3] === c.serverName, "events of the server only");
  t.pass();

  await openAudit();
  await form.locator("select[name=application_id]").selectOption({ label: appName });
  await form.getByRole("button", { name: "Show events" }).click();
  await page.waitForURL(new RegExp(`application_id=${appId}`));
  await rowsWhere(
    (r) => r.event.startsWith("application.") || r.event.startsWith("operation."),
    "events of the application only",
  );
  const ofApp = await rows();
  t.deepEqual(
    [...new Set(ofApp.map((r) => r.event))].sort(),
    ["application.created", "application.updated", "operation.deploy"],
    "the application's settings changes and its deploy",
  );
  await noSeriousViolations(t, "audit log of an application");
  // The deploy operation leads to its deployment.
  await page
    .getByTestId("audit-events")
    .getByRole("link", { name: /^deployment of / })
    .click();
  await page.waitForURL(new RegExp(`/app/applications/${appId}/deployments/${deploymentId}$`));

  const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
  const today = new Date().toISOString().slice(0, 10);
  await openAudit();
  await form.locator("input[name=until]").fill(yesterday);
  await form.getByRole("button", { name: "Show events" }).click();
  await page.waitForURL(new RegExp(`until=${yesterday}`));
  await page.getByText("No audit event matches these filters.").waitFor();
  await openAudit(`?since=${today}&until=${today}`);
  t.true((await rows()).length > 10);
});
