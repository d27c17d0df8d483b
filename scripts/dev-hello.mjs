#!/usr/bin/env node
// The one command after `make dev`: creates the sample application (examples/hello) when the
// dev tenant lacks it, deploys it from this checkout's committed branch, prints the steps as
// they finish, and prints its URL once its page answers through the dev proxy.
//
//   node scripts/dev-hello.mjs
//
// It reads <repo>/.relayctl/dev.json (RELAYCTL_DEV_DIR moves it), which `make dev` writes once
// it is ready; run it in a second terminal while `make dev` runs.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { HELLO_TEXT, appUrl, deployAndFollow, ensureHello, getThroughProxy } from "./dev/hello.mjs";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const STATE_DIR = resolve(process.env.RELAYCTL_DEV_DIR || join(REPO, ".relayctl"));
const DEV_JSON = join(STATE_DIR, "dev.json");
const log = (msg) => console.log(`[hello] ${msg}`);

function die(msg) {
  console.error(`[hello] ${msg}`);
  process.exit(1);
}

async function main() {
  if (!existsSync(DEV_JSON)) die(`${DEV_JSON} is missing: start \`make dev\` first and wait for its banner`);
  const dev = JSON.parse(readFileSync(DEV_JSON, "utf8"));
  const app = await ensureHello(dev, REPO, log);
  const done = await deployAndFollow(dev, app, log);
  const url = appUrl(app, dev);
  if (!url || !dev.proxy_url) {
    log(`deployed ${done.image}: no dev proxy runs (is caddy installed?), so it has no URL;`);
    log(`it listens on 127.0.0.1:${done.host_port}`);
    return;
  }
  const page = await getThroughProxy(dev.proxy_url, url);
  if (page.status !== 200 || !page.body.includes(HELLO_TEXT))
    die(`deployed, but ${url} through ${dev.proxy_url} answered ${page.status}: ${page.body.slice(0, 200)}`);
  const host = new URL(url).hostname;
  console.log(`
hello is live: ${url}
  (where *.localhost does not resolve: curl -H 'Host: ${host}' ${dev.proxy_url}/)`);
}

main().catch((err) => die(err.message));
