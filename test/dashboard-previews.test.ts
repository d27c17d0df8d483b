// Previews in the dashboard (issue 32) in a real browser against an installation that
// deploys for real (deploy-stack: NATS, MariaDB, api, gateway, Caddy, a podman agent)
// and an open registry (an image a CI pipeline pushed): the application form's
// deploy_tags and watch_paths save and say a refusal beside their field; the preview
// settings persist; a preview made from an image is listed, answers at its URL through
// Caddy, its own page says what it previews and links both ways, and Remove takes it
// away (route and containers); the preview env editor sets and removes a value; Git hosts
// (GitLab, Gitea, Forgejo connections): connected with the webhook secret shown once (and
// that secret authenticates a GitLab delivery, listed under the connection), an
// application linked to a project, removal refused while linked. Every page passes
// axe-core at laptop and phone widths. One browser, one stack, in order.
import { randomBytes } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import type { Locator, Page } from "playwright-core";
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
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { podman, removeAppContainers } from "./harness/containers";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { createAppRepo } from "./harness/git-repo";
import { createOwner } from "./harness/people";
import { proxyGet } from "./harness/proxy-client";
import { type Registry, startRegistry } from "./harness/registry";
import { request } from "./harness/http";
import { pollUntil } from "./harness/wait";

const DEPLOY_MS = 150_000;
const suffix = randomBytes(3).toString("hex");

let s: DeployStack;
let registry: Registry;
let b: Session;
let page: Page;
let shots: string;
let allPassed = true;
let parent: App;
/** The image "CI" pushed: it serves "version preview-image". */
let image: string;

test.before(async () => {
  registry = await startRegistry("unused", "unused", { open: true });
  const [repo, stack] = await Promise.all([
    createAppRepo({ first: "preview-image" }),
    startDeployStack({ registriesConf: registry.registriesConf }),
  ]);
  s = stack;
  const local = `localhost/relayctl-test-preview-${suffix}:1`;
  await podman(["build", "-q", "-t", local, repo.path]);
  image = await registry.pushImage(local, `preview-${suffix}:1`);
  await podman(["rmi", local]);
  // A pulled image carries no relayctl labels: the stack's cleanup by label would miss it.
  onCleanup(() => podman(["rmi", "-f", image]).then(() => undefined));
  parent = await s.createApp({}, repo);
  const owner = await createOwner(s.c.db.url, s.c.tenantId);
  b = await launchBrowser(s.c.baseUrl);
  page = b.page;
  shots = makeTempDir("previews-shots");
  await page.goto("/login?next=/app/");
  await page.getByLabel("E-mail").fill(owner.email);
  await page.getByLabel("Password").fill(owner.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/app\//);
});
// Only a run where every test passed replaces the screenshots the docs show (before cleanupAll).
test.afterEach.always((t) => {
  if (!t.passed) allPassed = false;
});
test.after(() => {
  if (allPassed) publishScreenshots(b);
});
test.after.always(cleanupAll);

async function open(path: string, heading: string) {
  await page.goto(path);
  await page.getByRole("heading", { level: 1, name: heading }).waitFor();
  await page.locator(".loading").first().waitFor({ state: "detached" });
}

/**
 * No serious or critical axe violation, at laptop and at phone width; with `shot`, a
 * screenshot at each (the laptop's with `region` in view, the phone's the whole page).
 */
async function axeBothWidths(t: ExecutionContext, name: string, shot?: { name: string; region: Locator }) {
  for (const [width, size] of [
    ["laptop", LAPTOP],
    ["phone", PHONE],
  ] as const) {
    await page.setViewportSize(size);
    const violations = await axeViolations(page);
    t.deepEqual(violations, [], `${name} at ${width} width: ${describeViolations(violations)}`);
    if (shot && size === LAPTOP) {
      await shot.region.scrollIntoViewIfNeeded();
      await screenshot(b, shots, shot.name);
    } else if (shot) await screenshot(b, shots, `${shot.name}-phone`, true);
  }
  await page.setViewportSize(LAPTOP);
}

/** A control's refusal: marked invalid, focused, and the note it is described by. */
async function errorOf(form: Locator, name: string) {
  const control = form.locator(`[name="${name}"]`);
  const ids = ((await control.getAttribute("aria-describedby")) ?? "").split(" ").filter(Boolean);
  let note = "";
  for (const id of ids) note += `${(await page.locator(`[id="${id}"]`).textContent()) ?? ""}\n`;
  return {
    invalid: await control.getAttribute("aria-invalid"),
    note,
    focused: await control.evaluate((el) => el === el.ownerDocument.activeElement),
  };
}

const appJson = async (id: string) =>
  (await s.manage(`/applications/${id}`)).json as Record<string, unknown> & {
    previews: Record<string, unknown>;
  };

test.serial(
  "application form - tags that deploy and watched paths save, with help, and a refusal beside each",
  async (t) => {
    await open(`/app/applications/${parent.id}`, parent.name);
    await page.getByText("Settings", { exact: true }).click();
    const form = page.getByRole("form", { name: "Edit application" });
    const tags = form.getByLabel("Tags that deploy");
    const paths = form.getByLabel(/Watched paths/);
    // The help is read with the field.
    t.regex((await errorOf(form, "deploy_tags")).note, /A pushed tag matching this pattern deploys/);
    t.regex((await errorOf(form, "watch_paths")).note, /changed file matches one of these globs/);

    await tags.fill("v 1");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.locator(".field-error").waitFor();
    const tagError = await errorOf(form, "deploy_tags");
    t.is(tagError.invalid, "true");
    t.regex(tagError.note, /Tags that deploy: must be a tag name pattern such as v\*/);
    t.true(tagError.focused, "the field in error has focus");
    t.false((await form.textContent())?.includes("deploy_tags"), "no API path shown");
    t.is((await appJson(parent.id)).deploy_tags, null, "nothing saved");
    await axeBothWidths(t, "settings with a refused tag pattern");

    await tags.fill("v*");
    await paths.fill("services/api/**\n/etc/passwd");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.locator(".field-error").waitFor();
    const pathError = await errorOf(form, "watch_paths");
    t.is(pathError.invalid, "true");
    t.regex(pathError.note, /Watched path 2: must be a relative path inside the repository/);
    t.true(pathError.focused);
    t.is(await tags.inputValue(), "v*", "the other field keeps its edit");

    await paths.fill("services/api/**\ndocs/*.md");
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Saved.").waitFor();
    t.like(await appJson(parent.id), { deploy_tags: "v*", watch_paths: ["services/api/**", "docs/*.md"] });

    // Shown again from what is stored; emptied, both are unset (null), not [] or "".
    await open(`/app/applications/${parent.id}`, parent.name);
    await page.getByText("Settings", { exact: true }).click();
    t.is(await tags.inputValue(), "v*");
    t.is(await paths.inputValue(), "services/api/**\ndocs/*.md");
    await tags.fill("");
    await paths.fill("");
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Saved.").waitFor();
    t.like(await appJson(parent.id), { deploy_tags: null, watch_paths: null });
  },
);

const PATTERN = "pr-{number}.{app}.preview.test";

test.serial("previews - the settings persist, and a bad hostname pattern is refused in words", async (t) => {
  await open(`/app/applications/${parent.id}`, parent.name);
  const section = page.getByRole("region", { name: "Previews" });
  await section.getByText("Previews are off").waitFor();
  await section.getByText("Preview settings", { exact: true }).click();
  const form = section.getByRole("form", { name: "Preview settings" });
  await form.getByLabel(/Deploy a preview of each pull request/).check();
  await form.getByLabel("Hostname pattern").fill("preview.example.test");
  await form.getByRole("button", { name: "Save preview settings" }).click();
  await form
    .getByRole("alert")
    .getByText(/Not saved: Hostname pattern: must contain \{number\} or \{key\}/)
    .waitFor();
  t.false((await appJson(parent.id)).previews.enabled, "nothing saved");

  await form.getByLabel("Hostname pattern").fill(PATTERN);
  await form.getByLabel(/At most/).fill("3");
  await form.getByLabel(/Memory per preview/).fill("256");
  await form.getByLabel(/CPUs per preview/).fill("0.5");
  await form.getByLabel(/Build pull requests from forks/).check();
  await form.getByRole("button", { name: "Save preview settings" }).click();
  await section.getByText("Previews are on: at most 3").waitFor();
  t.like((await appJson(parent.id)).previews, {
    enabled: true,
    domain_pattern: PATTERN,
    max: 3,
    allow_forks: true,
    copy_secrets: false,
    memory_mb: 256,
    cpus: 0.5,
  });

  // After a reload the form shows what is stored.
  await open(`/app/applications/${parent.id}`, parent.name);
  await section.getByText("Preview settings", { exact: true }).click();
  t.true(await form.getByLabel(/Deploy a preview of each pull request/).isChecked());
  t.is(await form.getByLabel("Hostname pattern").inputValue(), PATTERN);
  t.is(await form.getByLabel(/At most/).inputValue(), "3");
  t.true(await form.getByLabel(/Build pull requests from forks/).isChecked());
  t.false(await form.getByLabel(/Copy production's values/).isChecked());
  await axeBothWidths(t, "preview settings");

  // No limits for the preview the next test deploys: limits are the pipeline's test (previews.test.ts).
  await form.getByLabel(/Memory per preview/).fill("");
  await form.getByLabel(/CPUs per preview/).fill("");
  await form.getByRole("button", { name: "Save preview settings" }).click();
  await pollUntil(async () => ((await appJson(parent.id)).previews.memory_mb === null ? true : undefined), {
    timeoutMs: 10_000,
    what: "the limits cleared",
  });
  t.like((await appJson(parent.id)).previews, { memory_mb: null, cpus: null, enabled: true });
});

test.serial(
  "previews - one made from an image is listed, answers at its URL, links both ways, and Remove takes it away",
  async (t) => {
    await open(`/app/applications/${parent.id}`, parent.name);
    const section = page.getByRole("region", { name: "Previews" });
    await section.getByText("No previews.").waitFor();
    const form = section.getByRole("form", { name: "New preview" });
    await form.getByLabel("Name").fill("ci-1");
    await form.getByLabel(/Branch, tag or commit/).fill("main");
    await form.getByLabel(/Or an image/).fill(image);
    await form.getByRole("button", { name: "Create preview" }).click();
    await form.getByRole("alert").getByText("Give a branch, tag or commit, or an image: not both.").waitFor();
    await form.getByLabel(/Branch, tag or commit/).fill("");
    await form.getByRole("button", { name: "Create preview" }).click();

    const row = section.locator('tr[data-preview="ci-1"]');
    await row.waitFor();
    await row
      .locator(".badge", { hasText: /^live$/ })
      .first()
      .waitFor({ timeout: DEPLOY_MS });
    const [listed] = (await s.manage(`/applications/${parent.id}/previews`)).json.previews as {
      id: string;
      url: string;
      name: string;
      image: string;
      source: string;
      last_deployment: { deployment_id: string; status: string };
    }[];
    t.like(listed, { image, source: "api", last_deployment: { status: "completed" } });
    // Should the test fail before its removal: a preview's containers are labelled with its own id.
    onCleanup(() => removeAppContainers(listed!.id));
    const host = new URL(listed!.url).hostname;
    t.is(host, `pr-ci-1.${parent.name}.preview.test`);
    // The row says where, what and how it went.
    t.is(await row.getByRole("link", { name: listed!.url }).getAttribute("href"), listed!.url);
    t.regex((await row.textContent()) ?? "", new RegExp(`api.*${image.replace(/[.:/]/g, ".")}`));
    t.is(
      await row.getByRole("link", { name: /ago|just now/ }).getAttribute("href"),
      `/app/applications/${listed!.id}/deployments/${listed!.last_deployment.deployment_id}`,
    );
    t.is((await proxyGet(s.proxyPort, host)).body.trim(), "version preview-image");
    await axeBothWidths(t, "application page with a preview", { name: "previews", region: section });

    // The preview's own page is an application page that says what it previews.
    await row.getByRole("link", { name: "ci-1", exact: true }).click();
    await page.getByRole("heading", { level: 1, name: listed!.name }).waitFor();
    const of = page.getByTestId("preview-of");
    await of.getByText(`Preview of ${parent.name} · ci-1`).waitFor();
    t.is(await page.getByRole("region", { name: "Previews" }).count(), 0, "a preview has no previews");
    await axeBothWidths(t, "a preview's page");
    await of.getByRole("link", { name: parent.name }).click();
    await page.getByRole("heading", { level: 1, name: parent.name }).waitFor();

    // Remove, confirmed: gone from the list, the route and the server.
    await row.getByRole("button", { name: "Remove the preview ci-1" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Remove preview" }).click();
    await section.getByText("No previews.").waitFor({ timeout: 30_000 });
    t.deepEqual((await s.manage(`/applications/${parent.id}/previews`)).json.previews, []);
    await pollUntil(
      async () => ((await proxyGet(s.proxyPort, host)).body.includes("preview-image") ? undefined : true),
      { timeoutMs: 30_000, what: "the preview's route gone" },
    );
    await pollUntil(async () => ((await s.containersOf(listed!.id)).length === 0 ? true : undefined), {
      timeoutMs: 60_000,
      intervalMs: 500,
      what: "the preview's containers removed",
    });
    t.pass();
  },
);

test.serial("previews - the preview env editor sets a value (never shown) and removes it", async (t) => {
  await open(`/app/applications/${parent.id}`, parent.name);
  const section = page.getByRole("region", { name: "Previews" });
  await section.getByText("Preview environment variables", { exact: true }).click();
  const form = section.getByRole("form", { name: "Set a preview environment variable" });
  await form.getByLabel("Name").fill("DATABASE_URL");
  await form.getByLabel("Value").fill(`postgres://db-value-${suffix}`);
  await form.getByRole("button", { name: "Set variable" }).click();
  const listEl = section.getByRole("list", { name: "Preview environment variables" });
  await listEl.getByText("DATABASE_URL", { exact: true }).waitFor();
  t.false((await page.content()).includes(`db-value-${suffix}`), "the value is not on the page");
  const stored = (await s.manage(`/applications/${parent.id}/preview-env`)).json.variables as {
    name: string;
  }[];
  t.deepEqual(
    stored.map((v) => v.name),
    ["DATABASE_URL"],
  );
  await axeBothWidths(t, "preview env");
  await listEl.getByRole("button", { name: "Remove DATABASE_URL" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Remove variable" }).click();
  await section.getByText("No preview values.").waitFor();
  t.deepEqual((await s.manage(`/applications/${parent.id}/preview-env`)).json.variables, []);
});

test.serial(
  "git hosts - connected with the webhook secret shown once, which a GitLab delivery needs; a project linked; removal refused while linked",
  async (t) => {
    const token = `glpat-${suffix}-secret`;
    await open("/app/forges", "Git hosts");
    await page.getByText("No Git hosts connected.").waitFor();
    const form = page.getByRole("form", { name: "Connect a Git host" });
    await form.getByLabel("Kind").selectOption("gitlab");
    await form.getByLabel("Name").fill(`gl-${suffix}`);
    await form.getByLabel("Address").fill("https://gitlab.example.test");
    await form.getByLabel(/API token/).fill(token);
    await form.getByRole("button", { name: "Connect" }).click();
    const added = page.getByTestId("forge-added");
    await added.waitFor();
    const secret = await added.getByLabel("Webhook secret").inputValue();
    t.regex(secret, /^[0-9a-f]{64}$/);
    t.regex((await added.textContent()) ?? "", /Merge request events/);
    t.false((await page.content()).includes(token), "the API token is not on the page");
    const [forge] = (await s.manage("/forges")).json.forges as { id: string; webhook_url: string }[];
    t.true((await added.textContent())?.includes(forge!.webhook_url));
    const row = page.locator(`tr[data-forge="gl-${suffix}"]`);
    t.regex((await row.textContent()) ?? "", /GitLab.*https:\/\/gitlab\.example\.test/);
    await axeBothWidths(t, "Git hosts with a secret shown once");

    // The secret shown is the one GitLab must send: a wrong one is refused, this one recorded.
    const deliver = (secretToken: string) =>
      request(s.c, `/webhooks/gitlab/${forge!.id}`, {
        key: null,
        body: { object_kind: "push", ref: "refs/heads/main", project: { path_with_namespace: "acme/none" } },
        headers: {
          "x-gitlab-token": secretToken,
          "x-gitlab-event": "Push Hook",
          "x-gitlab-event-uuid": randomBytes(8).toString("hex"),
        },
      });
    t.is((await deliver("not-the-secret")).status, 401, "a wrong token is refused");
    t.is((await deliver(secret)).status, 202);
    await open("/app/forges", "Git hosts");
    t.false((await page.content()).includes(secret), "the secret is shown only once");
    await page.getByText(`Recent deliveries of gl-${suffix}`).click();
    await page
      .getByRole("list", { name: `Deliveries of gl-${suffix}` })
      .getByText("Push Hook")
      .waitFor();
    await axeBothWidths(t, "Git hosts with a delivery", {
      name: "git-hosts",
      region: page.getByRole("heading", { level: 1, name: "Git hosts" }),
    });

    // An application linked to a project on it, from its page.
    await open(`/app/applications/${parent.id}`, parent.name);
    await page.getByText("Git host project", { exact: true }).click();
    const link = page.getByRole("form", { name: "Link a Git host project" });
    await link.getByLabel("Project").fill("acme/shop");
    await link.getByRole("button", { name: "Link project" }).click();
    await page.getByTestId("forge-link").getByText(`Linked to acme/shop on gl-${suffix}`).waitFor();
    t.like((await s.manage(`/applications/${parent.id}/forge-repository`)).json, {
      connection_id: forge!.id,
      project: "acme/shop",
    });
    await axeBothWidths(t, "an application linked to a Git host project");

    // Removing the connection while it is linked is refused, saying why; unlinked, it goes.
    await open("/app/forges", "Git hosts");
    await row.getByRole("button", { name: `Remove gl-${suffix}` }).click();
    const dialog = page.getByRole("dialog");
    await dialog.getByRole("button", { name: "Remove connection" }).click();
    await dialog.getByRole("alert").waitFor();
    t.is(((await s.manage("/forges")).json.forges as unknown[]).length, 1, "still there");
    await dialog.getByRole("button", { name: "Cancel" }).click();
    t.is((await s.manage(`/applications/${parent.id}/forge-repository`, { method: "DELETE" })).status, 204);
    await row.getByRole("button", { name: `Remove gl-${suffix}` }).click();
    await dialog.getByRole("button", { name: "Remove connection" }).click();
    await page.getByText("No Git hosts connected.").waitFor();
    t.deepEqual((await s.manage("/forges")).json.forges, []);
  },
);
