// The agent's version as published in agent/package.json (reported in Hello and
// at enrollment). Read at run time: the file sits one level above both src/ and dist/.
import { readFileSync } from "node:fs";
import { join } from "node:path";

export const AGENT_VERSION: string = JSON.parse(
  readFileSync(join(__dirname, "..", "package.json"), "utf8"),
).version;
