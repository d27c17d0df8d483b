// make dev's state dir: what one run leaves for the next (state.json: base_url, automation_key,
// api_key, server_id, server_name; the database; the agent's enrollment; the master key), and
// dev.json, the ready signal (see scripts/dev.mjs's header). Files holding keys are 0600.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync";

export function stateFiles(stateDir, say) {
  const DB_FILE = join(stateDir, "dev.db");
  const AGENT_DIR = join(stateDir, "agent");
  const DEV_JSON = join(stateDir, "dev.json");
  const STATE_JSON = join(stateDir, "state.json");
  const json = (value) => `${JSON.stringify(value, null, 2)}\n`;
  return {
    dbFile: DB_FILE,
    agentDir: AGENT_DIR,
    devJson: DEV_JSON,
    stateJson: STATE_JSON,

    /** state.json (dev.json of older runs) when the db and the enrolled agent it describes are still there, else null. */
    load() {
      const file = existsSync(STATE_JSON) ? STATE_JSON : existsSync(DEV_JSON) ? DEV_JSON : null;
      if (!file) return null;
      let state;
      try {
        state = JSON.parse(readFileSync(file, "utf8"));
      } catch {
        say(`${file} is not valid JSON; starting over`);
        return null;
      }
      const missing = [
        [DB_FILE, "the database"],
        [join(AGENT_DIR, "agent.json"), "the agent's enrollment"],
      ].filter(([f]) => !existsSync(f));
      if (missing.length) {
        say(
          `${missing.map(([, w]) => w).join(" and ")} is gone (${missing.map(([f]) => f).join(", ")}); starting over`,
        );
        return null;
      }
      if (!state.automation_key || !state.server_id) {
        say(`${file} lacks automation_key or server_id; starting over`);
        return null;
      }
      return state;
    },

    /** Clears everything of an earlier, partial or stale run so the first run starts clean. */
    async wipe() {
      for (const f of [
        DEV_JSON,
        STATE_JSON,
        DB_FILE,
        `${DB_FILE}-wal`,
        `${DB_FILE}-shm`,
        `${DB_FILE}-journal`,
        AGENT_DIR,
      ]) {
        await rm(f, { recursive: true, force: true });
      }
      await mkdir(stateDir, { recursive: true, mode: 0o700 });
    },

    write: (state) => writeFileAtomic(STATE_JSON, json(state), 0o600),

    /** The ready signal: only after the ready check passed. */
    writeDevJson: (dev) => writeFileAtomic(DEV_JSON, json(dev), 0o600),

    /**
     * The master key that encrypts stored registry credentials: made once per dev
     * state dir (0600) and reused, so credentials stored in one run decrypt in the next.
     */
    async masterKey() {
      const file = join(stateDir, "master.key");
      if (existsSync(file)) return readFileSync(file, "utf8").trim();
      const key = randomBytes(32).toString("base64");
      await mkdir(stateDir, { recursive: true, mode: 0o700 });
      await writeFileAtomic(file, `${key}\n`, 0o600);
      return key;
    },
  };
}
