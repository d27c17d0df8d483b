// The sample application (examples/hello) through the public API, the way a person's script
// would: create "hello" when the tenant lacks it, deploy it, follow its steps, and read its
// page through the dev proxy. Used by `node scripts/dev-hello.mjs` and by `make dev --once`.
// The API key (X-API-Key) is the dev tenant's, from dev.json.
import { execFileSync } from "node:child_process";
import http from "node:http";
import { pollUntil } from "@relayctl/devkit";

export const HELLO = "hello";
/** What examples/hello/www/index.html says; the smoke check looks for it. */
export const HELLO_TEXT = "Hello from relayctl";
const DEPLOY_TIMEOUT_S = 300;

async function api(dev, method, path, body) {
  const res = await fetch(`${dev.base_url}${path}`, {
    method,
    headers: { "x-api-key": dev.api_key, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} → ${res.status} ${text.slice(0, 500)}`);
  return text ? JSON.parse(text) : null;
}

/** The checkout's branch (its commit when HEAD is detached): what the agent fetches. */
function currentRef(repo) {
  const git = (...args) => execFileSync("git", ["-C", repo, ...args], { encoding: "utf8" }).trim();
  const branch = git("rev-parse", "--abbrev-ref", "HEAD");
  return branch === "HEAD" ? git("rev-parse", "HEAD") : branch;
}

/** The dev URL of an app: the application's own `url` when the control plane gives one. */
export function appUrl(app, dev) {
  if (app.url) return app.url;
  return dev.apps_url ? dev.apps_url.replace("{app}", app.name) : null;
}

export async function ensureHello(dev, repo, log) {
  const { applications } = await api(dev, "GET", "/api/applications");
  const found = applications.find((a) => a.name === HELLO);
  if (found) return found;
  const app = await api(dev, "POST", "/api/applications", {
    name: HELLO,
    server_id: dev.server_id,
    linked_container_name: HELLO,
    container_port: 8080,
    // No fqdns: its dev hostname (hello.localhost) is the control plane's default from RELAYCTL_APPS_URL.
    git_repository: repo,
    deploy_branch: currentRef(repo),
    build: { type: "dockerfile", dockerfile: "examples/hello/Dockerfile", context: "examples/hello" },
    health_check_path: "/",
  });
  log(`created application "${HELLO}" (${app.id}) from ${repo} @ ${app.deploy_branch ?? currentRef(repo)}`);
  return app;
}

/** Deploys app, printing each step as it finishes; resolves the finished deployment. */
export async function deployAndFollow(dev, app, log) {
  const tenant = await api(dev, "GET", "/api/tenant");
  const base = `/api/tenants/${tenant.id}/applications/${app.id}`;
  const started = await api(dev, "POST", `${base}/deploy`, { timeout_seconds: DEPLOY_TIMEOUT_S });
  log(`deployment ${started.deployment_id} started`);
  const seen = new Map();
  const done = await pollUntil(
    async () => {
      const d = await api(dev, "GET", `${base}/deployments/${started.deployment_id}`);
      for (const s of d.steps ?? []) {
        if (seen.get(s.name) === s.status) continue;
        seen.set(s.name, s.status);
        const took = s.duration_ms == null ? "" : ` (${s.duration_ms} ms)`;
        log(`  ${s.name.padEnd(8)} ${s.status}${took}`);
      }
      return ["completed", "failed", "timeout"].includes(d.status) ? d : undefined;
    },
    {
      what: `deployment ${started.deployment_id} to finish`,
      timeoutMs: (DEPLOY_TIMEOUT_S + 30) * 1000,
      intervalMs: 250,
    },
  );
  // A deployment completes once the new version serves; retire (the old version's drain and
  // stop) goes on after that, so say so rather than leave "running" as the last word.
  for (const s of done.steps ?? []) {
    if (done.status === "completed" && s.status === "running")
      log(`  ${s.name.padEnd(8)} goes on in the background (the previous version drains, then stops)`);
  }
  if (done.status !== "completed") {
    const step = (done.steps ?? []).find((s) => s.name === done.failed_step);
    const tail = step?.log ? `\n${step.log.trim().split("\n").slice(-10).join("\n")}` : "";
    throw new Error(`deployment ${done.status} at ${done.failed_step ?? "?"}: ${done.error ?? ""}${tail}`);
  }
  return done;
}

/**
 * GET http://127.0.0.1:<proxy port>/ with Host: <app host>, whatever the resolver does with
 * *.localhost. devkit's proxyGet does the same but returns no headers, and `server` (Caddy sets
 * it; busybox httpd does not) is how the smoke check tells the page came through Caddy.
 */
export function getThroughProxy(proxyUrl, url) {
  const target = new URL(url);
  const proxy = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const req = http.get(
      {
        host: proxy.hostname,
        port: proxy.port,
        path: target.pathname,
        headers: { host: target.host, connection: "close" },
        agent: false,
        timeout: 5_000,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c) => {
          body += c;
        });
        res.on("end", () => resolve({ status: res.statusCode, server: res.headers.server ?? "", body }));
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer from ${proxyUrl} in 5 s`)));
    req.on("error", reject);
  });
}
