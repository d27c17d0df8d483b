// Servers as people see them (issue 31, defects 7 and 8), in real Chromium against a real
// installation (NATS, MariaDB, api and gateway processes, real agents): a server's page shows its
// agent, engine, uptime, connected since, a last heartbeat that advances (not the connect time),
// its applications and recent operations; removal revokes the agent (its stream closes, its old
// credential is refused, audited) and is refused while applications live on it; the installer
// warns about plain http to another machine; with the control plane stopped the connected badges
// stop being green; `relayctl servers list` shows CONNECTED. axe at laptop and phone widths.
// One stack, tests in order; the control plane is stopped last.
import { execFile } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { promisify } from "node:util";
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
import { CliUser } from "./harness/cli";
import { type Cluster, startCluster } from "./harness/cluster";
import { type Dash, auditEvents, signInDash } from "./harness/dashboard-session";
import { exec, waitForOperationEnd } from "./harness/http";
import { type Person, createOwner } from "./harness/people";
import { pollUntil } from "./harness/wait";

const sh = promisify(execFile);
const LIVE_MS = 20_000;
const uniq = (p: string) => `${p}-${randomBytes(3).toString("hex")}`;

let c: Cluster;
let owner: Person;
let dash: Dash;
let b: Session;
let page: Page;
let shots: string;

test.before(async () => {
  c = await startCluster();
  owner = await createOwner(c.db.url, c.tenantId);
  [dash, b] = await Promise.all([signInDash(c.baseUrl, owner), launchBrowser(c.baseUrl)]);
  page = b.page;
  shots = makeTempDir("servers-shots");
  // Signed out, / leads to sign-in and back to the dashboard after it.
  await page.goto("/");
  await page.getByLabel("E-mail").fill(owner.email);
  await page.getByLabel("Password").fill(owner.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { level: 1, name: "Servers" }).waitFor();
});
test.after.always(cleanupAll);
// The pages as this file saw them, into docs/screenshots/ (only when every test passed).
test.after(() => publishScreenshots(b));

/**
 * No serious or critical axe violation on the page as shown, at laptop and at phone width (where
 * nothing may scroll sideways), with a screenshot at each: <name>.png and <name>-phone.png.
 */
async function checkBothWidths(
  t: { deepEqual: (a: unknown, b: unknown, m?: string) => void; true: (v: boolean, m?: string) => void },
  name: string,
  /** The Servers list's own shots are dashboard-browser.test.ts's (servers.png). */
  shot = true,
) {
  for (const [suffix, size] of [
    ["", LAPTOP],
    ["-phone", PHONE],
  ] as const) {
    await page.setViewportSize(size);
    await page.locator(".loading").first().waitFor({ state: "detached" });
    const violations = await axeViolations(page);
    t.deepEqual(violations, [], `${name}${suffix}: ${describeViolations(violations)}`);
    const overflow = Number(await page.evaluate("document.documentElement.scrollWidth - window.innerWidth"));
    t.true(overflow <= 0, `${name}${suffix} scrolls sideways by ${overflow}px`);
    if (shot) await screenshot(b, shots, `${name}${suffix}`);
  }
  await page.setViewportSize(LAPTOP);
}

const row = (p: Page, name: string) => p.locator("tr", { has: p.locator("th", { hasText: name }) });

async function createApp(serverId: string) {
  const app = await dash.call("POST", "/api/applications", {
    name: uniq("shop"),
    server_id: serverId,
    linked_container_name: uniq("shop-web"),
    container_port: 8080,
  });
  if (app.status !== 201) throw new Error(`create application: ${app.status} ${app.text}`);
  return { id: String(app.json.id), name: String(app.json.name) };
}

test.serial(
  "servers - a server's page: agent, engine, uptime, connected since, a last heartbeat that advances, its applications and recent operations",
  async (t) => {
    const ran = await exec(c, { server_id: c.serverId, command: "echo on-the-page", run_id: uniq("run") });
    t.true([200, 202].includes(ran.status), ran.text);
    const opId = String(ran.json.operation_id);
    await waitForOperationEnd(c, opId, LIVE_MS);
    const app = await createApp(c.serverId);

    // The API: last_seen_at is the last heartbeat, stored while connected, so it moves past the
    // connect time (before, it was the connect time and never moved while the agent stayed).
    const moved = await pollUntil(
      async () => {
        const s = await dash.call("GET", `/api/servers/${c.serverId}`);
        if (s.status !== 200) throw new Error(`${s.status} ${s.text}`);
        const seen = Date.parse(String(s.json.last_seen_at));
        return seen > Date.parse(String(s.json.connected_at)) ? s.json : undefined;
      },
      { what: "a stored heartbeat after the connect", timeoutMs: LIVE_MS },
    );
    t.like(moved, { id: c.serverId, name: c.serverName, connected: true });
    t.regex(String(moved.agent_version), /\S/);
    t.true(
      Date.parse(String(moved.booted_at)) < Date.parse(String(moved.connected_at)),
      "booted before connecting",
    );

    await page.goto("/app/servers");
    await row(page, c.serverName).getByRole("link", { name: c.serverName }).click();
    await page.getByRole("heading", { level: 1, name: `Server ${c.serverName}` }).waitFor();
    t.regex(page.url(), new RegExp(`/app/servers/${c.serverId}$`));
    const facts = page.getByRole("definition");
    const fact = async (term: string) =>
      (
        await page.locator("dt", { hasText: term }).locator("xpath=following-sibling::dd[1]").innerText()
      ).trim();
    t.is(await fact("Agent version"), String(moved.agent_version));
    t.is(await fact("Host name"), String(moved.hostname));
    t.regex(await fact("Uptime"), /^\d+ (min|h \d+ min|days? \d+ h)$/);
    t.true((await facts.count()) > 5);
    await page.locator(".facts .badge", { hasText: /^connected$/ }).waitFor();
    const connectedSince = await page.getByTestId("connected-since").locator("time").getAttribute("datetime");
    t.is(connectedSince, String(moved.connected_at));
    // The page polls: the last heartbeat shown moves on while the page is open.
    const heartbeat = page.getByTestId("last-heartbeat").locator("time");
    const first = Date.parse(String(await heartbeat.getAttribute("datetime")));
    await pollUntil(
      async () => (Date.parse(String(await heartbeat.getAttribute("datetime"))) > first ? true : undefined),
      { what: "the page's last heartbeat to advance", timeoutMs: LIVE_MS },
    );
    // Its applications and its newest operations, the exec among them.
    await page.getByTestId("server-applications").getByRole("link", { name: app.name }).waitFor();
    const op = page.locator(`tr[data-operation-id="${opId}"]`);
    await op.waitFor();
    t.regex(await op.innerText(), /exec[\s\S]*succeeded/);
    await checkBothWidths(t, "server");
    await page.goto("/app/servers");
    await row(page, c.serverName)
      .locator(".badge", { hasText: /^connected$/ })
      .waitFor();
    await checkBothWidths(t, "servers-list", false);

    // Bad ids are answered with a detail, never a 500.
    const bad = await dash.call("GET", "/api/servers/not-a-uuid");
    t.is(bad.status, 422, bad.text);
    t.regex(String(bad.json.detail), /server_id/);
    const unknown = await dash.call("GET", `/api/servers/${randomUUID()}`);
    t.is(unknown.status, 404, unknown.text);
    t.regex(String(unknown.json.detail), /not found/);
  },
);

test.serial("servers - relayctl servers list shows CONNECTED and LAST SEEN; show and remove", async (t) => {
  const { key } = (await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", uniq("cli")])) as {
    key: string;
  };
  const idle = await c.addServer({ start: false, name: uniq("idle") });
  const u = new CliUser({ RELAYCTL_URL: c.baseUrl, RELAYCTL_TOKEN: key });
  const list = await u.run(["servers", "list"]);
  t.is(list.code, 0, list.stderr);
  t.regex(list.stdout, /^ID\s+NAME\s+CONNECTED\s+HOSTNAME\s+AGENT\s+LAST SEEN\s+ENGINE\s+PROXY\s+LABELS$/m);
  t.regex(list.stdout, new RegExp(`^${c.serverId}\\s+${c.serverName}\\s+yes\\s`, "m"));
  t.regex(list.stdout, new RegExp(`^${idle.serverId}\\s+${idle.serverName}\\s+no\\s`, "m"));
  const shown = await u.run(["servers", "show", c.serverName]);
  t.is(shown.code, 0, shown.stderr);
  t.regex(shown.stdout, /^connected\s+yes$/m);
  t.regex(shown.stdout, /^last_seen_at\s+\d{4}-/m);
  const removed = await u.run(["servers", "remove", idle.serverName]);
  t.is(removed.code, 0, removed.stderr);
  t.regex(removed.stdout, new RegExp(`^Removed ${idle.serverName}: its agent can no longer connect`, "m"));
  const after = await u.run(["servers", "list"]);
  t.false(after.stdout.includes(idle.serverId), "a removed server leaves the list");
});

test.serial(
  "servers - removal is refused while an application lives there, then revokes the agent: its stream closes, its credential is refused, audited",
  async (t) => {
    const s = await c.addServer({ start: true, name: uniq("doomed") });
    const agent = s.agent!;
    const app = await createApp(s.serverId);

    await page.goto(`/app/servers/${s.serverId}`);
    await page.getByRole("heading", { level: 1, name: `Server ${s.serverName}` }).waitFor();
    await page.getByRole("button", { name: "Remove server" }).click();
    const dialog = page.getByRole("dialog");
    t.regex(await dialog.innerText(), new RegExp(`still has applications \\(${app.name}\\)`));
    await dialog.getByRole("button", { name: "Remove server" }).click();
    // Refused by the API too, naming the application and what would happen to it.
    await dialog.getByRole("alert").waitFor();
    t.regex(await dialog.getByRole("alert").innerText(), new RegExp(`${app.name}.*no agent to manage`, "s"));
    await dialog.getByRole("button", { name: "Cancel" }).click();
    const refused = await dash.call("DELETE", `/api/servers/${s.serverId}`);
    t.is(refused.status, 409, refused.text);
    t.regex(String(refused.json.detail), new RegExp(app.name));
    // Its own removal events (the CLI's test removed another server).
    const removals = async () =>
      (await auditEvents(c, "server.removed")).filter((e) => e.payload.server_id === s.serverId);
    t.deepEqual(await removals(), [], "nothing removed yet");

    t.is((await dash.call("DELETE", `/api/applications/${app.id}`)).status, 204);
    const from = agent.proc.mark();
    await page.reload();
    await page.getByRole("button", { name: "Remove server" }).click();
    t.regex(await dialog.innerText(), /credential is revoked/);
    await dialog.getByRole("button", { name: "Remove server" }).click();
    await page.waitForURL(/\/app\/servers$/);
    await row(page, c.serverName).waitFor();
    t.is(await row(page, s.serverName).count(), 0, "the removed server leaves the list");

    // Its stream was closed and its reconnect with the old credential is refused.
    await agent.proc.waitForMsg("gateway rejected the agent credential", { timeoutMs: LIVE_MS, from });
    const gone = await dash.call("GET", `/api/servers/${s.serverId}`);
    t.is(gone.status, 404, gone.text);
    const [stored] = await c.db.query("SELECT agent_credential_hash, removed_at FROM servers WHERE id = ?", [
      s.serverId,
    ]);
    t.is(stored.agent_credential_hash, null);
    t.truthy(stored.removed_at);
    const removed = await removals();
    t.is(removed.length, 1);
    t.like(removed[0].payload, { server_id: s.serverId, server_name: s.serverName });
    t.is(removed[0].payload.actor.email, owner.email, "the person who removed it");
    // Nothing of the agent comes back: a later list still has no such server connected.
    const list = await dash.call("GET", "/api/servers");
    t.false((list.json.servers as { id: string }[]).some((x) => x.id === s.serverId));
    t.is((await dash.call("DELETE", `/api/servers/${s.serverId}`)).status, 404, "removed once");
    // A removed server takes no new application.
    const placed = await dash.call("POST", "/api/applications", {
      name: uniq("late"),
      server_id: s.serverId,
      linked_container_name: uniq("late-web"),
      container_port: 8080,
    });
    t.is(placed.status, 422, placed.text);
    t.regex(String(placed.json.detail), /^server_id: unknown server/);
  },
);

test.serial(
  "servers - the installer warns when it fetches over plain http from another machine",
  async (t) => {
    const script = await (await fetch(`${c.baseUrl}/install.sh`)).text();
    // A key of the right form: the script stops at the download, before any signature is checked.
    const key = `MCowBQYDK2VwAyEA${"A".repeat(43)}=`;
    const run = async (url: string) => {
      const dir = makeTempDir("install-warning");
      const args = ["-c", script, "install.sh", "--prefix", dir, "--no-systemd", "--signing-key", key];
      args.push("--url", url);
      // It fails at the download (no such host, nothing listening): only what it says first matters.
      return sh("sh", args, { timeout: 30_000 }).then(
        (r) => r.stderr,
        (e: { stderr: string }) => e.stderr,
      );
    };
    // The three at once: each waits for curl's retries before it fails.
    const [remote, loopback, tls] = await Promise.all([
      run("http://relay.invalid"),
      // Loopback where nothing listens: dev's own machine.
      run("http://127.0.0.1:9"),
      run("https://relay.invalid"),
    ]);
    t.regex(remote, /WARNING: http:\/\/relay\.invalid is plain http/);
    t.notRegex(loopback, /WARNING/, "a loopback URL is not warned about");
    t.notRegex(tls, /WARNING/);
  },
);

test.serial(
  "servers - with the control plane stopped, connected badges turn grey 'unknown' under a banner",
  async (t) => {
    await page.goto("/app/servers");
    const badge = row(page, c.serverName).locator(".badge");
    await badge.filter({ hasText: /^connected$/ }).waitFor();
    const detail = await b.context.newPage();
    await detail.goto(`/app/servers/${c.serverId}`);
    await detail.locator(".facts .badge", { hasText: /^connected$/ }).waitFor();

    // Killed, as a crash or a lost host would leave it: nothing answers the pages any more.
    await c.api.stop("SIGKILL");
    for (const p of [page, detail]) {
      await p
        .getByRole("alert")
        .filter({ hasText: /Cannot reach the control plane since/ })
        .waitFor({
          timeout: LIVE_MS,
        });
      t.is(await p.locator(".badge-completed").count(), 0, "no badge stays green");
    }
    t.is((await badge.innerText()).trim(), "unknown");
    t.is((await detail.locator(".facts .badge").innerText()).trim(), "unknown");
    await checkBothWidths(t, "servers-unreachable");
  },
);
