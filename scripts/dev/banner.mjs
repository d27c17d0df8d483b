// make dev's ready banner: about a dozen lines, one per thing a person does first (open the
// dashboard, sign in, deploy the sample, open its URL, use the CLI). The sign-in link is
// printed here and nowhere else (see owner.mjs); everything else is in dev.json and docs/dev.md.
import { existsSync } from "node:fs";
import { join } from "node:path";

export function printReady({
  paint,
  repo,
  state,
  stateDir,
  gatewayUrl,
  owner,
  ownerTtlMs,
  proxy,
  engine,
  once,
}) {
  const base = state.base_url;
  const signIn = owner.token
    ? `${base}/invite/${owner.token}\n             one-time link, ${ownerTtlMs / 60_000} min: makes ${owner.email} the owner`
    : owner.email
      ? `${base}/login as ${owner.email}`
      : `${base}/login`;
  const apps = proxy
    ? `${proxy.appsUrl.replace("{app}", "<app>")}   (or curl -H 'Host: <app>.localhost' ${proxy.url}/)`
    : "no dev proxy (caddy is not installed): deploys only say where the app listens";
  const cli = existsSync(join(repo, "bin/relayctl"))
    ? `./bin/relayctl login --url ${base}`
    : `./bin/relayctl login --url ${base}   (see docs/dev.md)`;
  const lines = [
    "",
    paint("32;1", "relayctl is running"),
    `  dashboard  ${base}/app/`,
    `  sign in    ${signIn}`,
    `  apps       ${apps}`,
    "  sample     make hello   (creates and deploys examples/hello, prints its URL)",
    `  CLI        ${cli}`,
    `  engine     ${engine.name ? `${engine.name} for containers` : `none: ${engine.why} (exec works, deploys fail)`}`,
    `  server     ${state.server_name} (${state.server_id}) on gateway ${gatewayUrl}`,
    `  keys       ${join(stateDir, "dev.json")} (automation key, API key); more in docs/dev.md`,
    once ? "" : "\nCtrl-C stops everything.\n",
  ];
  console.log(lines.join("\n"));
}
