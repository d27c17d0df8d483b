// Preview environments (issue 32) against a running control plane, a podman
// agent and Caddy, with GitHub's API the only stand-in (harness/github-api.ts):
// pull_request deliveries are @octokit/webhooks-examples' own payloads, signed
// as GitHub signs them; the repository is served over smart HTTP and its pull
// refs (refs/pull/N/head) are made with git, as GitHub publishes them.
import { randomBytes, randomUUID } from "node:crypto";
import { basename, dirname } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import { appImageIds, podman } from "./harness/containers";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type GitHttpServer, startGitHttp } from "./harness/git-http";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { type GitHubApiStandIn, githubAppEnv, startGitHubApi } from "./harness/github-api";
import { type GitHubWebhooks, githubWebhooks, installAndLink } from "./harness/github-webhooks";
import { proxyGet } from "./harness/proxy-client";
import { type Registry, startRegistry } from "./harness/registry";
import { waitForBody } from "./harness/traffic";
import { pollUntil } from "./harness/wait";

// biome-ignore lint/suspicious/noExplicitAny: example payloads are read and edited field by field
type Json = Record<string, any>;
const INSTALLATION = 41337;
const REPO_ID = 2296269;
const FULL_NAME = "octo-org/preview-app";
const SECRET = randomBytes(24).toString("hex");

let gh: GitHubApiStandIn;
let git: GitHttpServer;
let repo: AppRepo;
let s: DeployStack;
let app: App;
let hooks: GitHubWebhooks;
let examples: { name: string; examples: Json[] }[];
/** An image a CI pipeline built (version 1 of the repository), in a test registry that needs a login. */
let image: string;
let registry: Registry;
const REGISTRY_PASSWORD = `pw-${randomBytes(6).toString("hex")}`;

const example = (event: string, pick: (e: Json) => boolean): Json => {
  const found = examples.find((e) => e.name === event)?.examples.find(pick);
  if (!found) throw new Error(`no ${event} example`);
  return structuredClone(found);
};

const deliver = (event: string, payload: Json) => hooks.deliver(event, payload);
const processed = (id: string) => hooks.processed(id);

/** A pull_request payload (GitHub's example) for PR `n` at `sha`; a fork's head is another repository. */
function prPayload(
  action: string,
  n: number,
  sha: string,
  opts: { fork?: boolean; merged?: boolean } = {},
): Json {
  const p = example("pull_request", (e) => e.action === (action === "reopened" ? "opened" : action));
  p.action = action;
  p.number = n;
  p.repository = { ...p.repository, id: REPO_ID, full_name: FULL_NAME, name: basename(FULL_NAME) };
  p.installation = { id: INSTALLATION };
  p.pull_request = {
    ...p.pull_request,
    number: n,
    html_url: `https://github.com/${FULL_NAME}/pull/${n}`,
    merged: Boolean(opts.merged),
    head: {
      ...p.pull_request.head,
      sha,
      ref: `feature-${n}`,
      repo: {
        ...p.pull_request.head.repo,
        id: opts.fork ? 99_999 : REPO_ID,
        full_name: opts.fork ? "mallory/preview-app" : FULL_NAME,
      },
    },
    base: {
      ...p.pull_request.base,
      repo: { ...p.pull_request.base.repo, id: REPO_ID, full_name: FULL_NAME },
    },
  };
  return p;
}

/** Commits `version <label>` on a branch for PR n and publishes it as refs/pull/n/head; main is left as it was. */
async function pushToPr(n: number, label: string) {
  const main = (await repo.git(["rev-parse", "HEAD"])).trim();
  const c = await repo.commitVersion(label, `PR ${n}: version ${label}`);
  await repo.git(["update-ref", `refs/pull/${n}/head`, c.sha]);
  await repo.git(["reset", "-q", "--hard", main]);
  return c;
}

const previewsOf = async () => {
  const res = await s.manage(`/applications/${app.id}/previews`);
  if (res.status !== 200) throw new Error(describe(res));
  return res.json.previews as Json[];
};
/** Containers and images on the machine labelled with the application. */
async function artifactsOf(appId: string): Promise<number> {
  return (await s.containersOf(appId)).length + (await appImageIds(appId)).length;
}
const hostOf = (n: number | string) => `pr-${n}.${app.name}.preview.test`;

test.before(async () => {
  examples = (await import("@octokit/webhooks-examples")).default as never;
  gh = await startGitHubApi();
  repo = await createAppRepo({ name: "preview-app", first: "1" });
  // A private registry: the API preview pulls with the credential its request names.
  registry = await startRegistry("puller", REGISTRY_PASSWORD);
  const local = `localhost/relayctl-test-preview-${randomBytes(4).toString("hex")}:1`;
  await podman(["build", "-q", "--pull=never", "-t", local, repo.path]);
  image = await registry.pushImage(local, `preview-ci-${randomBytes(4).toString("hex")}:1`);
  // A pulled image carries no relayctl labels: the stack's cleanup by label would miss it.
  onCleanup(() => podman(["rmi", "-f", image]).then(() => undefined));
  git = await startGitHttp(dirname(repo.path), "x-access-token", (token) => gh.acceptsToken(token));
  gh.repositories.set(REPO_ID, {
    id: REPO_ID,
    full_name: FULL_NAME,
    default_branch: "main",
    private: true,
    clone_url: git.url(basename(repo.path)),
  });
  gh.installations.set(INSTALLATION, {
    id: INSTALLATION,
    account: { login: "octo-org", type: "Organization" },
    created_at: new Date().toISOString(),
    repositories: [REPO_ID],
  });
  s = await startDeployStack({
    registriesConf: registry.registriesConf,
    serverEnv: githubAppEnv(gh, SECRET),
  });
  hooks = await githubWebhooks(s.c.baseUrl, s.c.db, SECRET);
  app = await s.createApp({ git_repository: git.url("preview-app") });
  await installAndLink(
    s,
    hooks,
    example("installation", (e) => e.action === "created"),
    {
      installation: INSTALLATION,
      repositoryId: REPO_ID,
      fullName: FULL_NAME,
      applicationId: app.id,
    },
  );
});
test.after.always(cleanupAll);

test.serial(
  "previews - settings are validated and a pull request does nothing while they are off",
  async (t) => {
    const bad = await s.manage(`/applications/${app.id}`, {
      method: "PATCH",
      body: { previews: { enabled: true, domain_pattern: "preview.{app}.example.com" } },
    });
    t.is(bad.status, 422, describe(bad));
    t.regex(String(bad.json.detail), /domain_pattern/);
    const off = await processed(await deliver("pull_request", prPayload("opened", 7, repo.head().sha)));
    t.is(off.result, "nothing", JSON.stringify(off));
    t.regex(JSON.stringify(off.skipped), /previews are off/);
    const api = await s.manage(`/applications/${app.id}/previews`, { body: { name: "ci" } });
    t.is(api.status, 409, describe(api));
    const ok = await s.manage(`/applications/${app.id}`, {
      method: "PATCH",
      body: {
        previews: {
          enabled: true,
          domain_pattern: "pr-{number}.{app}.preview.test",
          max: 2,
          memory_mb: 64,
          cpus: 0.5,
        },
      },
    });
    t.is(ok.status, 200, describe(ok));
    t.like(ok.json.previews, { enabled: true, max: 2, allow_forks: false, copy_secrets: false });
  },
);

test.serial(
  "previews - a pull request opened answers at its URL through Caddy with preview env only; a push updates it; status and one comment",
  async (t) => {
    await s.setEnv(app.id, { GREETING: "production", SECRET_TOKEN: "prod-secret" });
    const pe = await s.manage(`/applications/${app.id}/preview-env`, {
      method: "PUT",
      body: { variables: { GREETING: "preview" } },
    });
    t.is(pe.status, 200, describe(pe));
    t.deepEqual(
      (pe.json.variables as Json[]).map((v) => v.name),
      ["GREETING"],
    );
    const v1 = await pushToPr(1, "pr1-a");
    const opened = await processed(await deliver("pull_request", prPayload("opened", 1, v1.sha)));
    t.is(opened.result, "deployed", JSON.stringify(opened));
    await waitForBody(s.proxyPort, hostOf(1), "version pr1-a", 120_000);
    // Production's names with preview values; a secret without one is not copied.
    await waitForBody(s.proxyPort, hostOf(1), "preview", 10_000, "/cgi-bin/env?GREETING");
    await waitForBody(s.proxyPort, hostOf(1), "<unset>", 10_000, "/cgi-bin/env?SECRET_TOKEN");
    const [p] = await previewsOf();
    // The owner's limits reach the container (podman with runc, cgroups v1 here, takes them).
    const [container] = await s.containersOf(p!.id);
    const limits = await podman([
      "inspect",
      "--format",
      "{{.HostConfig.Memory}} {{.HostConfig.NanoCpus}}",
      container!,
    ]);
    t.is(limits.stdout.trim(), `${64 * 1024 * 1024} 500000000`);
    t.like(p, {
      key: "pr-1",
      number: 1,
      source: "github",
      from_fork: false,
      head_sha: v1.sha,
      pull_request_url: `https://github.com/${FULL_NAME}/pull/1`,
      url: `https://${hostOf(1)}`,
    });
    // The preview is an application of its own for the existing pages, but not in the list.
    t.is((await s.manage(`/applications/${p!.id}`)).status, 200);
    const list = (await s.manage("/applications")).json.applications as Json[];
    t.deepEqual(
      list.map((a) => a.id),
      [app.id],
    );
    const v2 = await pushToPr(1, "pr1-b");
    const sync = await processed(await deliver("pull_request", prPayload("synchronize", 1, v2.sha)));
    t.is(sync.result, "deployed", JSON.stringify(sync));
    await waitForBody(s.proxyPort, hostOf(1), "version pr1-b", 120_000);
    // The same head again (another hook's delivery: the same body twice is a replay, refused
    // before it is recorded): nothing deployed twice.
    const other = prPayload("synchronize", 1, v2.sha);
    other.hook = { id: 2 };
    const again = await processed(await deliver("pull_request", other));
    t.is(again.result, "nothing", JSON.stringify(again));
    t.regex(JSON.stringify(again.skipped), /already deployed/);
    const statuses = await pollUntil(
      async () => {
        const mine = gh.statuses.filter((x) => x.sha === v2.sha);
        return mine.some((x) => x.state === "success") ? mine : undefined;
      },
      { what: "success status of the preview", timeoutMs: 30_000 },
    );
    t.true(
      statuses.every((x) => x.context === `relayctl/${app.name}/preview`),
      JSON.stringify(statuses),
    );
    // One comment, edited (not repeated) when each deployment starts and ends, saying how it went.
    const comments = await pollUntil(
      () => {
        const mine = gh.comments.filter((c) => c.number === 1);
        return mine[0]?.body.includes(`${v2.sha}\nDeployment: deployed and serving`) ? mine : undefined;
      },
      { what: "the comment saying the pushed commit is deployed", timeoutMs: 30_000 },
    );
    t.is(comments.length, 1, JSON.stringify(gh.comments));
    t.true(comments[0]!.edits >= 2, JSON.stringify(comments));
    t.regex(comments[0]!.body, new RegExp(`https://${hostOf(1).replaceAll(".", "\\.")}`));
    t.regex(comments[0]!.body, new RegExp(v2.sha));
  },
);

test.serial("previews - a fork's pull request is not built by default, and says why", async (t) => {
  const before = (await previewsOf()).length;
  const out = await processed(
    await deliver("pull_request", prPayload("opened", 3, repo.head().sha, { fork: true })),
  );
  t.is(out.result, "nothing", JSON.stringify(out));
  t.regex(JSON.stringify(out.skipped), /fork.*allow_forks/);
  t.is((await previewsOf()).length, before);
});

test.serial(
  "previews - the API opens a preview (a CI pipeline's rck_ key); the cap stops the idlest; closing removes containers, images and route",
  async (t) => {
    const bad = await s.manage(`/applications/${app.id}/previews`, {
      body: { name: "Bad Name", image: "x" },
    });
    t.is(bad.status, 422, describe(bad));
    const both = await s.manage(`/applications/${app.id}/previews`, {
      body: { name: "ci", ref: "main", image: "busybox" },
    });
    t.is(both.status, 422, describe(both));
    const first = (await previewsOf()).find((p) => p.key === "pr-1")!;
    const unknown = await s.manage(`/applications/${app.id}/previews`, {
      body: { name: "ci", image, registry_credential_id: randomUUID() },
    });
    t.is(unknown.status, 422, describe(unknown));
    t.regex(String(unknown.json.detail), /^registry_credential_id: unknown registry credential/);
    const cred = await s.manage("/registry-credentials", {
      body: {
        name: `preview-reg-${randomBytes(3).toString("hex")}`,
        registry_url: `http://${registry.host}`,
        username: "puller",
        password: REGISTRY_PASSWORD,
      },
    });
    t.is(cred.status, 201, describe(cred));
    const opened = await s.manage(`/applications/${app.id}/previews`, {
      body: { name: "ci", image, registry_credential_id: cred.json.id },
    });
    t.is(opened.status, 202, describe(opened));
    t.like(opened.json.preview, { key: "ci", source: "api", number: null, image });
    const op = await s.waitOperation(String(opened.json.operation_id));
    t.is(op.json.status, "completed", describe(op));
    await waitForBody(s.proxyPort, hostOf("ci"), "version 1", 60_000);
    // A third preview with max 2: pr-1 (idle longest) is stopped first, audited with the reason.
    const v = await pushToPr(4, "pr4");
    const out = await processed(await deliver("pull_request", prPayload("opened", 4, v.sha)));
    t.is(out.result, "deployed", JSON.stringify(out));
    const keys = (await previewsOf()).map((p) => p.key).sort();
    t.deepEqual(keys, ["ci", "pr-4"]);
    const audit = (await s.manage("/audit?limit=200")).json.events as Json[];
    t.true(
      audit.some((e) => e.event_type === "preview.removed" && /cap of 2/.test(String(e.payload.reason))),
      "the cap's removal is audited with its reason",
    );
    await pollUntil(async () => ((await artifactsOf(first.id)) === 0 ? true : undefined), {
      what: "the stopped preview's containers and images gone",
      timeoutMs: 60_000,
    });
    // Closed (merged): the preview goes with its containers, images and route.
    const pr4 = (await previewsOf()).find((p) => p.key === "pr-4")!;
    await waitForBody(s.proxyPort, hostOf(4), "version pr4", 120_000);
    const closed = await processed(
      await deliver("pull_request", prPayload("closed", 4, v.sha, { merged: true })),
    );
    t.is(closed.result, "removed", JSON.stringify(closed));
    // Its one comment now says so (edited, not a second one).
    const said = gh.comments.filter((c) => c.number === 4);
    t.is(said.length, 1, JSON.stringify(said));
    t.regex(said[0]!.body, /Removed: the pull request was merged/);
    // The agent removes the containers, then the images (cleanup.ts).
    await pollUntil(async () => ((await artifactsOf(pr4.id)) === 0 ? true : undefined), {
      what: "the closed preview's containers and images gone",
      timeoutMs: 60_000,
    });
    const gone = await proxyGet(s.proxyPort, hostOf(4), "/");
    t.is(gone.status, 404, "its route is gone from Caddy: the host is routed nowhere");
    // The API's delete: 202, and the same removal.
    const ci = (await previewsOf()).find((p) => p.key === "ci")!;
    const del = await s.manage(`/applications/${app.id}/previews/${ci.id}`, { method: "DELETE" });
    t.is(del.status, 202, describe(del));
    t.is((await s.manage(`/applications/${app.id}/previews/${ci.id}`)).status, 404);
    await pollUntil(async () => ((await artifactsOf(ci.id)) === 0 ? true : undefined), {
      what: "the deleted preview's containers and images gone",
      timeoutMs: 60_000,
    });
  },
);

test.serial("previews - a fork's pull request, once allowed, is built without any env value", async (t) => {
  const on = await s.manage(`/applications/${app.id}`, {
    method: "PATCH",
    body: { previews: { allow_forks: true } },
  });
  t.is(on.status, 200, describe(on));
  t.like(on.json.previews, { allow_forks: true, max: 2, domain_pattern: "pr-{number}.{app}.preview.test" });
  const v = await pushToPr(5, "fork5");
  const out = await processed(await deliver("pull_request", prPayload("opened", 5, v.sha, { fork: true })));
  t.is(out.result, "deployed", JSON.stringify(out));
  await waitForBody(s.proxyPort, hostOf(5), "version fork5", 120_000);
  // Not even the preview value: a fork's code gets no env at all.
  await waitForBody(s.proxyPort, hostOf(5), "<unset>", 10_000, "/cgi-bin/env?GREETING");
  const p = (await previewsOf()).find((x) => x.key === "pr-5")!;
  t.like(p, { from_fork: true, head_sha: v.sha });
  const child = (await s.manage(`/applications/${p.id}`)).json;
  t.is(child.git_credential, null);
  t.is((await s.manage(`/applications/${app.id}`, { method: "DELETE" })).status, 204);
  // Deleting the application deletes its previews, containers and all.
  t.is((await s.manage(`/applications/${p.id}`)).status, 404);
  await pollUntil(async () => ((await artifactsOf(p.id)) === 0 ? true : undefined), {
    what: "the preview's containers and images gone with its application",
    timeoutMs: 60_000,
  });
});
