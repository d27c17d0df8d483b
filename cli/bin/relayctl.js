#!/usr/bin/env node
// The cli package's "bin" (npm exec relayctl, npm's .bin link): a committed file, because npm ci
// links bins when it installs, before `make dev`/`make build` have written dist/; a bin pointing
// at dist/main.js was left unlinked on a fresh clone.
const { existsSync } = require("node:fs");
const { join } = require("node:path");

const main = join(__dirname, "..", "dist", "main.js");
if (!existsSync(main)) {
  process.stderr.write(`relayctl: ${main} is not built yet: run \`make dev\` or \`make build\` first\n`);
  process.exit(69);
}
require(main);
