// Previews from the relayctl CLI and from MCP (issue 32) against an installation that
// deploys for real (deploy-stack: NATS, MariaDB, api, gateway, Caddy, a podman agent)
// and an open registry holding an image "CI" pushed: `apps show` prints the preview
// settings; `previews create --image --wait` deploys one that answers at its URL,
// `previews list` shows it, a preview's id works with `deployments`, `previews remove`
// takes it away; bad input exits 64 or 65 with the reason; `previews env` is write-only;
// completion offers application names after `previews`. MCP (a person's OAuth token):
// list_previews, create_preview (followed to its outcome) and remove_preview.
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { run } from "@relayctl/devkit";
import test from "ava";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { CLI_MAIN, CliUser } from "./harness/cli";
import { podman, removeAppContainers } from "./harness/containers";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { createAppRepo } from "./harness/git-repo";
import { Browser, createOwner, deviceTokens } from "./harness/people";
import { proxyGet } from "./harness/proxy-client";
import { type Registry, startRegistry } from "./harness/registry";
import { pollUntil } from "./harness/wait";

const DEPLOY_MS = 150_000;
const suffix = randomBytes(3).toString("hex");
const PATTERN = "{key}.{app}.cli.test";

let s: DeployStack;
let registry: Registry;
let parent: App;
let image: string;
let u: CliUser;

interface Listed {
  id: string;
  key: string;
  url: string;
  status: string;
  image: string | null;
  source: string;
}

test.before(async () => {
  registry = await startRegistry("unused", "unused", { open: true });
  const [repo, stack] = await Promise.all([
    createAppRepo({ first: "cli-image" }),
    startDeployStack({ registriesConf: registry.registriesConf }),
  ]);
  s = stack;
  const local = `localhost/relayctl-test-cli-preview-${suffix}:1`;
  await podman(["build", "-q", "-t", local, repo.path]);
  image = await registry.pushImage(local, `cli-preview-${suffix}:1`);
  await podman(["rmi", local]);
  // A pulled image carries no relayctl labels: the stack's cleanup by label would miss it.
  onCleanup(() => podman(["rmi", "-f", image]).then(() => undefined));
  parent = await s.createApp({}, repo);
  const on = await s.manage(`/applications/${parent.id}`, {
    method: "PATCH",
    body: { previews: { enabled: true, domain_pattern: PATTERN } },
  });
  if (on.status !== 200) throw new Error(`PATCH previews: ${on.status} ${on.text}`);
  u = new CliUser({ RELAYCTL_URL: s.c.baseUrl, RELAYCTL_TOKEN: s.apiKey });
});
test.after.always(cleanupAll);

const listed = async () =>
  (await s.manage(`/applications/${parent.id}/previews`)).json.previews as unknown as Listed[];

/** Removed: no longer listed, no longer routed, its containers gone from the server. */
async function gone(p: Listed) {
  await pollUntil(async () => ((await listed()).some((x) => x.id === p.id) ? undefined : true), {
    timeoutMs: 30_000,
    intervalMs: 250,
    what: `${p.key} no longer listed`,
  });
  const host = new URL(p.url).hostname;
  await pollUntil(
    async () => ((await proxyGet(s.proxyPort, host)).body.includes("cli-image") ? undefined : true),
    { timeoutMs: 30_000, what: `${host} no longer routed` },
  );
  await pollUntil(async () => ((await s.containersOf(p.id)).length === 0 ? true : undefined), {
    timeoutMs: 60_000,
    intervalMs: 500,
    what: `${p.key}'s containers removed`,
  });
}

test.serial("cli previews - apps show prints the preview settings in words", async (t) => {
  const r = await u.run(["apps", "show", parent.name]);
  t.is(r.code, 0, r.stderr);
  t.regex(
    r.stdout,
    /previews\s+on: at most 5, \{key\}\.\{app\}\.cli\.test, forks not built, production values not copied, no memory limit, no CPU limit/,
  );
  const json = await u.run(["apps", "show", parent.name, "--json"]);
  t.like(JSON.parse(json.stdout).previews, { enabled: true, domain_pattern: PATTERN, max: 5 });
});

test.serial(
  "cli previews - create from an image --wait goes live at its URL; list, deployments by id, remove by name",
  async (t) => {
    const made = await u.run(
      ["previews", "create", parent.name, "--name", "ci-7", "--image", image, "--wait"],
      {
        timeoutMs: DEPLOY_MS,
      },
    );
    t.is(made.code, 0, made.stderr);
    t.regex(made.stderr, /Preview ci-7 of .*: deployment [0-9a-f-]{36} started/);
    t.regex(made.stdout, /status\s+completed/);
    const host = `ci-7.${parent.name}.cli.test`;
    t.regex(made.stdout, new RegExp(`live at https?://${host.replace(/\./g, "\\.")}`));
    // --wait is quiet about the log (--follow prints it).
    t.notRegex(made.stderr, /\[build\]/);
    t.is((await proxyGet(s.proxyPort, host)).body.trim(), "version cli-image");

    const list = await u.run(["previews", "list", parent.name]);
    t.is(list.code, 0, list.stderr);
    const [head, row] = list.stdout.split("\n");
    t.regex(head!, /^NAME\s+STATUS\s+URL\s+SOURCE\s+HEAD\s+LAST DEPLOY\s+AGE\s+ID$/);
    t.regex(
      row!,
      new RegExp(`^ci-7\\s+live\\s+https?://${host.replace(/\./g, "\\.")}\\S*\\s+api\\s+\\S+cli-preview`),
    );
    const [p] = JSON.parse((await u.run(["previews", "list", parent.name, "--json"])).stdout)
      .previews as Listed[];
    t.like(p, { key: "ci-7", image, source: "api", status: "live" });
    // Should the test fail before its removal: a preview's containers are labelled with its own id.
    onCleanup(() => removeAppContainers(p!.id));

    // A preview is an application: its id works where an application's does.
    const deployments = await u.run(["deployments", p!.id]);
    t.is(deployments.code, 0, deployments.stderr);
    t.regex(deployments.stdout, /completed/);

    // Bad input: the CLI's own checks exit 64, the API's refusals 65, each saying why.
    const badName = await u.run(["previews", "create", parent.name, "--name", "Bad_Name"]);
    t.is(badName.code, 64);
    t.regex(badName.stderr, /--name: 1-40 characters/);
    const both = await u.run([
      "previews",
      "create",
      parent.name,
      "--name",
      "x",
      "--ref",
      "main",
      "--image",
      image,
    ]);
    t.is(both.code, 64);
    t.regex(both.stderr, /--ref and --image: give one/);
    const badImage = await u.run(["previews", "create", parent.name, "--name", "x", "--image", "bad image"]);
    t.is(badImage.code, 65, badImage.stderr);
    // The API says which field, in words.
    t.regex(badImage.stderr, /^relayctl: image: must be an image reference/);
    const unknown = await u.run(["previews", "remove", parent.name, "no-such-preview"]);
    t.is(unknown.code, 65);
    t.regex(unknown.stderr, /preview 'no-such-preview' of .* not found/);
    t.is((await listed()).length, 1, "nothing made by the refused calls");

    // Completion names the application's previews after it.
    const complete = await completer();
    t.true((await complete("previews", "remove", parent.name, "")).includes("ci-7"));
    t.deepEqual(await complete("previews", "show", parent.name, "ci"), ["ci-7"]);

    const removed = await u.run(["previews", "remove", parent.name, "ci-7"]);
    t.is(removed.code, 0, removed.stderr);
    t.regex(removed.stdout, /Removing the preview ci-7/);
    await gone(p!);
    t.deepEqual(await listed(), []);
  },
);

test.serial("cli previews - env set, list and unset; values never shown", async (t) => {
  const secret = `s3cret-${suffix}`;
  const set = await u.run(["previews", "env", "set", parent.name, "LOG_LEVEL=debug"]);
  t.is(set.code, 0, set.stderr);
  const piped = await u.run(["previews", "env", "set", parent.name, "API_TOKEN"], { input: `${secret}\n` });
  t.is(piped.code, 0, piped.stderr);
  t.false(piped.stdout.includes(secret));
  const list = await u.run(["previews", "env", "list", parent.name]);
  t.is(list.code, 0, list.stderr);
  t.regex(list.stdout, /API_TOKEN/);
  t.regex(list.stdout, /LOG_LEVEL/);
  t.false(list.stdout.includes(secret) || list.stdout.includes("debug"), "no value shown");
  const unset = await u.run(["previews", "env", "unset", parent.name, "LOG_LEVEL"]);
  t.is(unset.code, 0, unset.stderr);
  const names = (
    (await s.manage(`/applications/${parent.id}/preview-env`)).json.variables as { name: string }[]
  ).map((v) => v.name);
  t.deepEqual(names, ["API_TOKEN"]);
  // Production's own env is untouched.
  t.deepEqual((await s.manage(`/tenants/${s.tenantId}/applications/${parent.id}/env`)).json.variables, []);
  const again = await u.run(["previews", "env", "unset", parent.name, "LOG_LEVEL"]);
  t.is(again.code, 65, "a name not set is refused");
});

/** Bash completion as a person has it: this build's script, `relayctl` on PATH, the key's login. */
async function completer() {
  const script = join(makeTempDir("completion"), "relayctl.bash");
  writeFileSync(script, (await u.run(["completion", "bash"])).stdout);
  const bin = makeTempDir("bin");
  writeFileSync(join(bin, "relayctl"), `#!/bin/sh\nexec "${process.execPath}" "${CLI_MAIN}" "$@"\n`, {
    mode: 0o755,
  });
  return async (...words: string[]) => {
    const { stdout } = await run(
      "bash",
      [
        "-c",
        'source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _relayctl; printf "%s\\n" "${COMPREPLY[@]}"',
        script,
        "relayctl",
        ...words,
      ],
      {
        timeoutMs: 20_000,
        env: { PATH: `${bin}:${process.env.PATH}`, RELAYCTL_URL: s.c.baseUrl, RELAYCTL_TOKEN: s.apiKey },
      },
    );
    return stdout.split("\n").filter(Boolean).sort();
  };
}

test.serial("cli previews - bash completion offers application names after previews commands", async (t) => {
  const complete = await completer();
  t.deepEqual(await complete("previews", ""), ["--help", "create", "env", "list", "remove", "show"]);
  t.deepEqual(await complete("previews", "list", parent.name.slice(0, 6)), [parent.name]);
  t.true((await complete("previews", "create", "")).includes(parent.name));
  t.true((await complete("previews", "env", "set", "")).includes(parent.name));
  // No preview now: nothing after the application (but the command's options).
  t.false((await complete("previews", "remove", parent.name, "")).includes(parent.name));
});

test.serial(
  "mcp previews - list_previews, create_preview followed to its outcome, remove_preview (a person's token)",
  async (t) => {
    const owner = await createOwner(s.c.db.url, s.c.tenantId);
    const browser = new Browser(s.c.baseUrl);
    await browser.signIn(owner);
    const token = (await deviceTokens(s.c.baseUrl, browser)).access_token;
    const client = new Client({ name: "relayctl-test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${s.c.baseUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    );
    onCleanup(() => client.close());
    const names = (await client.listTools()).tools.map((x) => x.name);
    for (const n of ["list_previews", "create_preview", "remove_preview"]) t.true(names.includes(n), n);

    const steps: string[] = [];
    const made = await client.callTool(
      { name: "create_preview", arguments: { application_id: parent.id, name: "mcp-1", image } },
      { onprogress: (p) => steps.push(String(p.message)), timeout: DEPLOY_MS, resetTimeoutOnProgress: true },
    );
    t.falsy(made.isError, JSON.stringify(made.content));
    const out = made.structuredContent as { preview: Listed; deployment: { status: string } };
    onCleanup(() => removeAppContainers(out.preview.id));
    t.like(out, { preview: { key: "mcp-1", image, status: "live" }, deployment: { status: "completed" } });
    t.true(steps.length > 0, "progress reported");
    const host = `mcp-1.${parent.name}.cli.test`;
    t.is((await proxyGet(s.proxyPort, host)).body.trim(), "version cli-image");

    const list = await client.callTool({ name: "list_previews", arguments: { application_id: parent.id } });
    t.deepEqual(
      (list.structuredContent as { previews: Listed[] }).previews.map((p) => p.key),
      ["mcp-1"],
    );
    // The API's own refusal comes back as the answer.
    const off = await client.callTool({
      name: "create_preview",
      arguments: { application_id: parent.id, name: "mcp-2", image: "bad image" },
    });
    t.true(off.isError);

    const removed = await client.callTool({
      name: "remove_preview",
      arguments: { application_id: parent.id, preview_id: out.preview.id },
    });
    t.like(removed.structuredContent, { removed: true });
    await gone(out.preview);
  },
);
