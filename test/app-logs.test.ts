// Application logs (issue 29): GET /api/applications/{id}/logs reads the live
// container's stdout and stderr with the engine on the application's server:
// the last `tail` lines, or with follow=true server-sent events as lines come;
// every value of the application's env is scrubbed on the agent; follows are
// bounded per key; an automation key reads only within its server scope; and
// `relayctl logs` prints them. A real agent, podman, Caddy, NATS and MariaDB.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import test from "ava";
import { describe } from "./harness/assertions";
import { axeViolations, describeViolations, launchBrowser } from "./harness/browser";
import { cleanupAll } from "./harness/cleanup";
import { CliUser } from "./harness/cli";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { createOwner } from "./harness/people";
import { type ApiResponse, request } from "./harness/http";
import { proxyGet } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

const run = promisify(execFile);

/** Long enough to be scrubbed, URL-safe so a request can make the app print it. */
const SECRET = "s3cr3t-logs-value-8841";
const FOLLOWS_PER_KEY = 2;

// The app prints one stderr line, 30 stdout lines and the secret, then serves; its
// CGI /cgi-bin/log?<word> prints `request <word>` on stderr (a line on demand).
const START = [
  "sh",
  "-c",
  // The pause: the engine logs its two pipes apart, so err-first stays before the rest.
  'echo err-first >&2; sleep 1; i=1; while [ $i -le 30 ]; do echo out-line-$i; i=$((i+1)); done; echo "the secret is $LOG_SECRET"; exec httpd -f -p 8080 -h /www',
];
const LOG_CGI = `#!/bin/sh
printf 'Content-Type: text/plain\\r\\n\\r\\nok'
echo "request $QUERY_STRING" >&2
`;

let s: DeployStack;
let repo: AppRepo;
let app: App;
let container: string;

test.before(async () => {
  repo = await createAppRepo();
  writeFileSync(join(repo.path, "www", "cgi-bin", "log"), LOG_CGI, { mode: 0o755 });
  await repo.commitCommand("logs", START);
  s = await startDeployStack({ serverEnv: { RELAYCTL_LOGS_FOLLOWS_PER_KEY: String(FOLLOWS_PER_KEY) } });
  app = await s.createApp({}, repo);
  const env = await s.setEnv(app.id, { LOG_SECRET: SECRET });
  if (env.status !== 200) throw new Error(`set env: ${describe(env)}`);
  const d = await s.deployAndWait(app.id);
  if (d.op.json.status !== "completed") throw new Error(`deploy: ${describe(d.op)}`);
  container = String((await s.deployment(app.id, d.deploymentId)).json.container_name);
});
test.after.always(cleanupAll);

const logsPath = (query = "", id = app.id) => `/api/applications/${id}/logs${query}`;
const readLogs = (query: string, key?: string): Promise<ApiResponse> =>
  key === undefined
    ? s.manage(`/applications/${app.id}/logs${query}`)
    : request(s.c, logsPath(query), { key });

interface Line {
  stream: string;
  text: string;
}

/** A follow as a browser's EventSource holds it: events as they come, closed by the client. */
class Follow {
  readonly events: { event: string; data: unknown }[] = [];
  readonly #abort = new AbortController();
  status = 0;
  body = "";
  #ended: Promise<void> = Promise.resolve();

  static async open(query: string, headers: Record<string, string>): Promise<Follow> {
    const f = new Follow();
    const res = await fetch(`${s.c.baseUrl}${logsPath(query)}`, {
      headers: { accept: "text/event-stream", ...headers },
      signal: f.#abort.signal,
    });
    f.status = res.status;
    if (!(res.headers.get("content-type") ?? "").startsWith("text/event-stream") || !res.body) {
      f.body = await res.text();
      return f;
    }
    f.#ended = f.#read(res.body).catch(() => undefined);
    return f;
  }

  async #read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event && data) this.events.push({ event, data: JSON.parse(data) });
      }
    }
  }

  lines(): Line[] {
    return this.events.filter((e) => e.event === "log").map((e) => e.data as Line);
  }

  async waitForLine(what: string, match: (l: Line) => boolean): Promise<Line> {
    try {
      return await pollUntil(async () => this.lines().find(match), { what, timeoutMs: 30_000 });
    } catch (err) {
      throw new Error(`${(err as Error).message}; events so far: ${JSON.stringify(this.events)}`);
    }
  }

  close(): Promise<void> {
    this.#abort.abort();
    return this.#ended;
  }
}

const withApiKey = () => ({ "x-api-key": s.apiKey });

/** Engine children following this test's container (`podman logs ... --follow <name>`). */
async function followChildren(): Promise<string[]> {
  const { stdout } = await run("ps", ["-eo", "pid,args"]);
  return stdout.split("\n").filter((l) => / logs .*--follow /.test(l) && l.trim().endsWith(` ${container}`));
}

/** Makes the application print `request <word>` on stderr. */
async function printOnDemand(word: string): Promise<void> {
  const r = await proxyGet(s.proxyPort, app.fqdn, `/cgi-bin/log?${word}`);
  if (r.status !== 200) throw new Error(`cgi: ${r.status} ${r.body}`);
}

test.serial(
  "logs - tail returns the last N lines of the live container, the env value scrubbed",
  async (t) => {
    const r = await readLogs("?tail=5");
    t.is(r.status, 200, describe(r));
    t.is(r.json.container, container);
    t.is(r.json.end, "complete", describe(r));
    t.false(r.json.truncated);
    t.deepEqual(r.json.lines, [
      { stream: "stdout", text: "out-line-27" },
      { stream: "stdout", text: "out-line-28" },
      { stream: "stdout", text: "out-line-29" },
      { stream: "stdout", text: "out-line-30" },
      { stream: "stdout", text: "the secret is ***" },
    ]);

    // The default tail (200) holds the whole log, stderr lines with their stream.
    const all = await readLogs("");
    t.is(all.status, 200, describe(all));
    const lines = all.json.lines as Line[];
    t.true(
      lines.some((l) => l.stream === "stderr" && l.text === "err-first"),
      describe(all),
    );
    t.is(lines.filter((l) => l.stream === "stdout" && /^out-line-\d+$/.test(l.text)).length, 30);
    t.false(all.text.includes(SECRET), "the env value never leaves the agent");
  },
);

test.serial("logs - tail beyond 10,000 or a malformed since is refused by the schema", async (t) => {
  const tooMany = await readLogs("?tail=10001");
  t.is(tooMany.status, 422, describe(tooMany));
  t.regex(String(tooMany.json.detail), /tail/);
  const since = await readLogs("?since=--all");
  t.is(since.status, 422, describe(since));
  t.regex(String(since.json.detail), /since/);
});

test.serial(
  "logs follow - a line printed after the follow began arrives scrubbed; closing the client ends the agent's child",
  async (t) => {
    const f = await Follow.open("?follow=true&tail=1", withApiKey());
    t.teardown(() => f.close());
    t.is(f.status, 200, f.body);
    await f.waitForLine("the tail's line", (l) => l.text === "the secret is ***");
    t.true((await followChildren()).length > 0, "the agent runs the engine's logs --follow");

    await printOnDemand("marker-after-start");
    const line = await f.waitForLine("the line printed on demand", (l) =>
      l.text.includes("marker-after-start"),
    );
    t.deepEqual(line, { stream: "stderr", text: "request marker-after-start" });
    // The env value printed live (in a line of its own) is scrubbed too.
    await printOnDemand(SECRET);
    await f.waitForLine("the scrubbed live line", (l) => l.text === "request ***");
    t.false(JSON.stringify(f.events).includes(SECRET));

    await f.close();
    await pollUntil(async () => ((await followChildren()).length === 0 ? true : undefined), {
      what: "the agent's podman logs --follow to end after the client left",
      timeoutMs: 15_000,
    });
    t.pass();
  },
);

test.serial(
  "logs follow - the follows of one key are bounded (429), and a closed one frees its place",
  async (t) => {
    const open: Follow[] = [];
    t.teardown(() => Promise.all(open.map((f) => f.close())).then(() => undefined));
    for (let i = 0; i < FOLLOWS_PER_KEY; i++) {
      const f = await Follow.open("?follow=1&tail=1", withApiKey());
      t.is(f.status, 200, f.body);
      open.push(f);
    }
    const refused = await readLogs("?follow=true");
    t.is(refused.status, 429, describe(refused));
    t.regex(String(refused.json.detail), new RegExp(`at most ${FOLLOWS_PER_KEY} log follows .* per key`));

    // Another credential of the tenant is not held back by this key's follows.
    const other = await Follow.open("?follow=true&tail=1", { authorization: `Bearer ${s.c.key}` });
    t.is(other.status, 200, other.body);
    open.push(other);

    await open.shift()!.close();
    const again = await pollUntil(
      async () => {
        const f = await Follow.open("?follow=true&tail=1", withApiKey());
        if (f.status === 200) return f;
        await f.close();
        return undefined;
      },
      { what: "a place freed by the closed follow", timeoutMs: 15_000 },
    );
    open.push(again);
    await again.waitForLine("a line of the new follow", (l) => l.text.length > 0);
    t.pass();
  },
);

test.serial("logs access - an automation key reads only within its server scope", async (t) => {
  const other = await s.c.addServer({ start: false });
  const keyFor = async (servers: string[]) => {
    const res = await s.manage("/automation-keys", {
      body: { name: `logs-${Math.random().toString(36).slice(2, 8)}`, servers },
    });
    if (res.status !== 201) throw new Error(`create key: ${describe(res)}`);
    return String(res.json.key);
  };
  const outside = await readLogs("?tail=3", await keyFor([other.serverId]));
  t.is(outside.status, 403, describe(outside));
  t.regex(String(outside.json.detail), /outside this key's server scope/);
  t.false(outside.text.includes("out-line"));

  const inside = await readLogs("?tail=3", await keyFor([s.c.serverId]));
  t.is(inside.status, 200, describe(inside));
  t.is((inside.json.lines as Line[]).length, 3);
});

test.serial("logs - an application with no live container answers 409", async (t) => {
  const idle = await s.createApp({}, repo);
  const r = await s.manage(`/applications/${idle.id}/logs`);
  t.is(r.status, 409, describe(r));
  t.regex(String(r.json.detail), /no live container/);
});

test.serial("cli logs - relayctl logs <app> --tail prints the lines on their streams", async (t) => {
  const u = new CliUser();
  const cli = (args: string[]) =>
    u.run(["logs", app.name, ...args, "--url", s.c.baseUrl, "--token", s.apiKey]);
  await printOnDemand("cli-marker");
  const last = await cli(["--tail", "1"]);
  t.is(last.code, 0, `${last.stdout}\n${last.stderr}`);
  t.is(last.stdout, "");
  t.is(last.stderr, "request cli-marker\n");

  const all = await cli([]);
  t.is(all.code, 0, all.stderr);
  t.regex(all.stdout, /^out-line-1\nout-line-2\n(.*\n)*out-line-30\nthe secret is \*\*\*\n/);
  t.regex(all.stderr, /^err-first$/m);
  t.notRegex(all.stdout, /err-first|request/);
});

test.serial(
  "dashboard logs - the Logs section follows the live container, marks stderr, and closing it ends the read",
  async (t) => {
    const owner = await createOwner(s.c.db.url, s.c.tenantId);
    const { page } = await launchBrowser(s.c.baseUrl);
    await page.goto("/login?next=/app/");
    await page.getByLabel("E-mail").fill(owner.email);
    await page.getByLabel("Password").fill(owner.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(/\/app\/$/);
    await page.goto(`/app/applications/${app.id}`);
    await page.getByRole("heading", { level: 1, name: app.name }).waitFor();

    await page.locator("summary", { hasText: "Logs" }).click();
    const log = page.getByTestId("app-logs");
    await log.getByText("the secret is ***", { exact: true }).waitFor();
    await page
      .getByTestId("logs-state")
      .getByText(/^Following/)
      .waitFor();
    await printOnDemand("dashboard-marker");
    const line = log.getByText("request dashboard-marker", { exact: true });
    await line.waitFor();
    t.is(await line.getAttribute("class"), "stderr");
    t.false((await log.innerText()).includes(SECRET));
    const violations = await axeViolations(page);
    t.deepEqual(violations, [], describeViolations(violations));

    t.true((await followChildren()).length > 0);
    await page.locator("summary", { hasText: "Logs" }).click();
    await pollUntil(async () => ((await followChildren()).length === 0 ? true : undefined), {
      what: "the read to end once the Logs section is closed",
      timeoutMs: 15_000,
    });
  },
);
