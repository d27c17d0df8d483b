// ava's configuration (a file rather than package.json's "ava" field, for sortTestFiles).
// make test runs 3 files at once on 2 cores and is CPU-bound: a heavy file that starts
// last runs alone at the end with a core idle. The heaviest files (the CPU column of
// scripts/test-run.mjs's table in a full run) therefore start first, then the other
// integration files, then the unit tests, which take a second or two each.
import { basename } from "node:path";

/** Heaviest first, by CPU seconds in a full run (update from the table when it shifts). */
const HEAVY = [
  "chaos",
  "container-image",
  "install-agent",
  "install-agent-bundles",
  "app-runtime",
  "dashboard-browser",
  "dashboard-browser-settings",
  "deploy-rollback",
  "fleets",
  "dashboard-fleets",
  "dashboard-apps",
  "cli-deploy",
  "fleets-drain",
  "audit-verify",
  "deploy-pipeline",
  "deploy-switch",
  "security-accounts",
  "previews",
  "forges",
  "forges-previews",
  "github-app-push",
  "github-app-repository",
  "github-app",
  "github-app-webhooks",
  "dashboard-deployment-live",
  "cli-previews",
  "dashboard-previews",
  "mcp-deploy",
  "mcp",
  "deploy-back-to-back",
  "master-key-rotation",
  "dashboard-people",
  "cli-daily",
  "servers-page",
  "restart-by-app",
  "app-logs",
  "dashboard-audit",
  "cli-relayctl-login",
  "deploy-queue-health",
  "cli-relayctl",
  "keys-api",
  "action-deploy-sync",
  "cli-install",
  "external-deploy",
  "external-deploy-refusals",
  "security-github",
  "external-deploy-view",
  "deploy-image-reuse",
  "container-view",
];

const rank = (file) => {
  const i = HEAVY.indexOf(basename(file, ".test.ts"));
  if (i >= 0) return i;
  return /[/\\]test[/\\][^/\\]+$/.test(file) ? HEAVY.length : HEAVY.length + 1;
};

export default {
  files: [
    "test/**/*.test.ts",
    "agent/src/**/*.test.ts",
    "control-plane/src/**/*.test.ts",
    "reverse-proxy-sync/src/**/*.test.ts",
    "tracing/src/**/*.test.ts",
    "action/src/**/*.test.ts",
    "devkit/src/**/*.test.ts",
  ],
  extensions: { ts: "commonjs" },
  nodeArguments: ["--import=tsx"],
  workerThreads: false,
  timeout: "3m",
  concurrency: 3,
  verbose: true,
  sortTestFiles: (a, b) => rank(a) - rank(b) || a.localeCompare(b),
};
