// The built relayctl CLI's login as a process against a running control plane (cli-stack.ts):
// the device flow with the approval done on /login and /device over HTTP, as a browser would,
// opening the browser, slow_down, a denied login, refresh after the access token expires (alone
// and by commands started at once), logout and a login revoked behind the CLI's back.
// The other command groups: cli-relayctl.test.ts, cli-relayctl-help.test.ts.
import { existsSync, readFileSync, statSync, chmodSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import test from "ava";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { CliUser, collect, waitForStderr } from "./harness/cli";
import { ACCESS_TTL_S, type CliStack, startCliStack, stored } from "./harness/cli-stack";
import type { Cluster } from "./harness/cluster";
import { request } from "./harness/http";
import { type Browser, type Person, postForm } from "./harness/people";
import { pollUntil } from "./harness/wait";
import { listenOnFreePort } from "@relayctl/devkit";

let c: Cluster;
let owner: Person;
let browser: Browser;
let login: CliStack["login"];

test.before(async () => {
  ({ c, owner, browser, login } = await startCliStack());
});
test.after.always(cleanupAll);

test.serial(
  "cli - login runs the device flow; the login is saved 0600; whoami shows the person",
  async (t) => {
    const u = new CliUser();
    const r = await login(u);
    t.is(r.code, 0, r.stderr);
    t.regex(r.stderr, /enter the code [BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}/);
    t.regex(r.stdout, new RegExp(`Logged in to .* as ${owner.email.replace(/\./g, "\\.")} \\(owner`));
    t.is(statSync(join(u.configDir, "credentials.json")).mode & 0o777, 0o600);
    t.regex(stored(u).access_token, /^rco_/);
    const who = await u.run(["whoami"]);
    t.is(who.code, 0, who.stderr);
    t.regex(who.stdout, /^user\s+owner-.*@example\.test$/m);
    t.regex(who.stdout, /^role\s+owner$/m);
    const json = await u.run(["whoami", "--json"]);
    t.is(json.code, 0);
    t.like(JSON.parse(json.stdout), {
      type: "user",
      tenant_id: c.tenantId,
      user: { id: owner.id, email: owner.email },
    });
  },
);

test.serial(
  "cli - login opens the browser at the verification address when there is a display",
  async (t) => {
    // The desktop's opener (xdg-open) stands in as a script that records what it was asked to open.
    const bin = makeTempDir("xdg-open");
    const opened = join(bin, "opened");
    writeFileSync(join(bin, "xdg-open"), `#!/bin/sh\nprintf '%s\\n' "$1" >> '${opened}'\n`, { mode: 0o755 });
    const desktop = { DISPLAY: ":99", RELAYCTL_NO_BROWSER: "", PATH: `${bin}:${process.env.PATH}` };
    const u = new CliUser(desktop);
    const child = u.spawn(["login", "--url", c.baseUrl]);
    const done = collect(child);
    const [, uri] = await waitForStderr(child, /\(or open (\S+)\)\nA browser window was opened\.\n/);
    // The shell creates the file for `>>` before printf writes to it: wait for the whole line.
    const seen = await pollUntil(
      async () => {
        const text = existsSync(opened) ? readFileSync(opened, "utf8") : "";
        return text.endsWith("\n") ? text : undefined;
      },
      {
        what: "xdg-open to be run",
        timeoutMs: 10_000,
        intervalMs: 100,
      },
    );
    t.is(seen, `${uri}\n`);
    await browser.answerDevice(uri, "approve");
    t.is((await done).code, 0);
    // --no-browser: the address is printed, nothing is opened.
    const v = new CliUser(desktop);
    const quiet = v.spawn(["login", "--url", c.baseUrl, "--no-browser", "--json"]);
    const quietDone = collect(quiet);
    const [, uri2] = await waitForStderr(quiet, /\(or open (\S+)\)/);
    await browser.answerDevice(uri2, "approve");
    const r = await quietDone;
    t.is(r.code, 0, r.stderr);
    t.false(r.stderr.includes("A browser window was opened"));
    // With --json the prompts stay on stderr and stdout is the one JSON answer: who is logged in.
    t.like(JSON.parse(r.stdout), { type: "user", user: { email: owner.email } });
    t.is(readFileSync(opened, "utf8"), `${uri}\n`);
  },
);

/**
 * A pass-through HTTP proxy in front of the api that records each request to
 * /oauth/token (arrival time, answer) and sends the first device-code poll twice,
 * as a network that duplicates a request would: the copy is answered
 * authorization_pending, the original — now too soon after it — slow_down.
 */
async function duplicatingProxy() {
  const polls: { at: number; error: string }[] = [];
  let duplicated = false;
  const forward = async (path: string, method: string, headers: Headers, body: Buffer | undefined) =>
    fetch(`${c.baseUrl}${path}`, { method, headers, body, redirect: "manual" });
  const server = createServer(async (req, res) => {
    const at = Date.now();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers))
      if (typeof v === "string" && !["host", "connection", "content-length"].includes(k)) headers.set(k, v);
    const isPoll = req.url === "/oauth/token" && String(body).includes("device_code");
    if (isPoll && !duplicated) {
      duplicated = true;
      await (await forward(req.url!, req.method!, headers, body)).arrayBuffer();
    }
    const answer = await forward(req.url!, req.method!, headers, body);
    const text = Buffer.from(await answer.arrayBuffer());
    if (isPoll) polls.push({ at, error: answer.ok ? "" : String(JSON.parse(String(text)).error) });
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "text/plain" });
    res.end(text);
  });
  const port = await listenOnFreePort(server);
  onCleanup(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${port}`, polls };
}

test.serial("cli - login honours slow_down: its polls are 5 s further apart from then on", async (t) => {
  const proxy = await duplicatingProxy();
  const u = new CliUser();
  const child = u.spawn(["login", "--url", proxy.url]);
  const done = collect(child, { timeoutMs: 60_000 });
  const [, uri] = await waitForStderr(child, /\(or open (\S+)\)/);
  await pollUntil(async () => (proxy.polls.length >= 1 ? true : undefined), {
    what: "the CLI's first poll",
    timeoutMs: 15_000,
    intervalMs: 100,
  });
  t.is(proxy.polls[0].error, "slow_down");
  await browser.answerDevice(uri, "approve");
  const r = await done;
  t.is(r.code, 0, r.stderr);
  // interval 1 s + 5 s: every poll after the slow_down came at least 6 s after the one before.
  t.true(proxy.polls.length >= 2, JSON.stringify(proxy.polls));
  for (let i = 1; i < proxy.polls.length; i++) {
    const gap = proxy.polls[i].at - proxy.polls[i - 1].at;
    t.true(gap >= 6000, `poll ${i} came ${gap} ms after the one before`);
    t.not(proxy.polls[i].error, "slow_down");
  }
  t.is(proxy.polls.at(-1)!.error, "");
});

test.serial("cli - a denied login exits with the auth code", async (t) => {
  const u = new CliUser();
  const child = u.spawn(["login", "--url", c.baseUrl]);
  const done = collect(child);
  const [, uri] = await waitForStderr(child, /\(or open (\S+)\)/);
  await browser.answerDevice(uri, "deny");
  const r = await done;
  t.is(r.code, 77);
  t.is(r.stderr.trim().split("\n").at(-1), "relayctl: the sign-in request was denied");
});

test.serial("cli - an expired access token is refreshed transparently and the new pair saved", async (t) => {
  const u = new CliUser();
  t.is((await login(u)).code, 0);
  const before = stored(u);
  // Wait until the server itself refuses the stored access token as expired.
  await pollUntil(
    async () => {
      const r = await request(c, "/api/me", { key: before.access_token });
      return r.status === 401 && /expired/.test(String(r.json.detail)) ? true : undefined;
    },
    { what: "the access token to expire", timeoutMs: (ACCESS_TTL_S + 5) * 1000, intervalMs: 250 },
  );
  // A credentials file someone widened is replaced, not rewritten in place: 0600 again.
  chmodSync(join(u.configDir, "credentials.json"), 0o644);
  const r = await u.run(["whoami", "--json"]);
  t.is(r.code, 0, r.stderr);
  t.is(statSync(join(u.configDir, "credentials.json")).mode & 0o777, 0o600);
  const after = stored(u);
  t.not(after.access_token, before.access_token);
  t.not(after.refresh_token, before.refresh_token);
  t.true(after.expires_at > before.expires_at);
  // The old refresh token is spent: the server treats its reuse as theft.
  const reuse = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "refresh_token",
    refresh_token: before.refresh_token,
    client_id: "relayctl-cli",
  });
  t.is(reuse.json.error, "invalid_grant");
  // ...which revoked the family, so this login has ended: auth exit code.
  const ended = await u.run(["whoami"]);
  t.is(ended.code, 77);
  t.regex(ended.stderr, /^relayctl: (OAuth access token has been revoked|your login has ended)/);
});

test.serial(
  "cli - commands started at once after expiry share one refresh; the login survives",
  async (t) => {
    const u = new CliUser();
    t.is((await login(u)).code, 0);
    const before = stored(u);
    await pollUntil(
      async () => {
        const r = await request(c, "/api/me", { key: before.access_token });
        return r.status === 401 && /expired/.test(String(r.json.detail)) ? true : undefined;
      },
      { what: "the access token to expire", timeoutMs: (ACCESS_TTL_S + 5) * 1000, intervalMs: 250 },
    );
    const reuses = async () =>
      Number(
        (
          await c.db.query(
            "SELECT COUNT(*) AS n FROM audit_events WHERE event_type = 'oauth.refresh_token_reused' AND key_id = ?",
            [owner.id],
          )
        )[0].n,
      );
    const reusedBefore = await reuses();
    // Four commands in four terminals, one login: each finds the token expired.
    const runs = await Promise.all(Array.from({ length: 4 }, () => u.run(["whoami", "--json"])));
    for (const r of runs) t.is(r.code, 0, r.stderr);
    t.not(stored(u).refresh_token, before.refresh_token);
    t.false(existsSync(join(u.configDir, "credentials.lock")));
    // No refresh token was presented twice, so the server never ended the login.
    t.is(await reuses(), reusedBefore);
    const again = await u.run(["whoami"]);
    t.is(again.code, 0, again.stderr);
  },
);

test.serial("cli - logout revokes the login on the server; a copy of its tokens is refused", async (t) => {
  const u = new CliUser();
  t.is((await login(u)).code, 0);
  const tokens = stored(u);
  const out = await u.run(["logout", "--json"]);
  t.is(out.code, 0);
  t.deepEqual(JSON.parse(out.stdout), { logged_out: true });
  t.false(existsSync(join(u.configDir, "credentials.json")));
  const me = await request(c, "/api/me", { key: tokens.access_token });
  t.is(me.status, 401);
  t.regex(String(me.json.detail), /revoked/);
  const again = await u.run(["whoami"]);
  t.is(again.code, 77);
  // A token revoked behind the CLI's back: its next command exits 77 with the server's detail.
  const v = new CliUser();
  t.is((await login(v)).code, 0);
  await postForm(c.baseUrl, "/oauth/revoke", { token: stored(v).refresh_token, client_id: "relayctl-cli" });
  const revoked = await v.run(["servers", "list"]);
  t.is(revoked.code, 77);
  t.is(revoked.stderr, "relayctl: OAuth access token has been revoked: log in again\n");
});
