// Where the CLI keeps a login: `credentials.json` in the user's config dir
// ($RELAYCTL_CONFIG_DIR, else $XDG_CONFIG_HOME/relayctl, else ~/.config/relayctl),
// mode 0600 in a 0700 directory, replaced with relayctl's one atomic write
// (@relayctl/reverse-proxy-sync/atomic-file: temp file, fsync, rename, fsync of the
// directory) so a crash mid-refresh never leaves half a token file.
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync/atomic-file";
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { CliError, EXIT } from "./errors.js";

export interface Credentials {
  url: string;
  access_token: string;
  refresh_token: string;
  /** Epoch ms when the access token expires. */
  expires_at: number;
  /** The access token's lifetime as issued (ms), to refresh a tenth of it early. */
  lifetime_ms: number;
  client_id: string;
}

export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.RELAYCTL_CONFIG_DIR) return env.RELAYCTL_CONFIG_DIR;
  return join(env.XDG_CONFIG_HOME || join(homedir(), ".config"), "relayctl");
}

const file = () => join(configDir(), "credentials.json");

export function loadCredentials(): Credentials | undefined {
  try {
    return JSON.parse(readFileSync(file(), "utf8")) as Credentials;
  } catch {
    return undefined;
  }
}

/** Replaces the login; the file is 0600 whatever the umask or the mode of the one it replaces. */
export async function saveCredentials(c: Credentials): Promise<void> {
  mkdirSync(configDir(), { recursive: true, mode: 0o700 });
  await writeFileAtomic(file(), `${JSON.stringify(c, null, 2)}\n`, 0o600);
}

export function removeCredentials(): void {
  rmSync(file(), { force: true });
}

/** A lock older than this was left by a process that died mid-refresh (a refresh takes a round trip). */
const STALE_LOCK_MS = 30_000;

function lockIsStale(lock: string): boolean {
  try {
    const pid = Number(readFileSync(lock, "utf8"));
    if (pid > 0) {
      try {
        process.kill(pid, 0);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ESRCH") return true; // its holder is gone
      }
    }
    return Date.now() - statSync(lock).mtimeMs > STALE_LOCK_MS;
  } catch {
    return false; // just released: try again
  }
}

/**
 * Runs `fn` holding the login's lock (`credentials.lock`, created exclusively),
 * so two relayctl processes sharing a login — a long-running `relayctl mcp` and
 * a command in another terminal — never both spend one refresh token: the
 * server would take the second use for theft and end the login.
 */
export async function withCredentialsLock<T>(fn: () => Promise<T>): Promise<T> {
  const dir = configDir();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const lock = join(dir, "credentials.lock");
  const deadline = Date.now() + STALE_LOCK_MS + 10_000;
  for (;;) {
    try {
      writeFileSync(lock, String(process.pid), { flag: "wx", mode: 0o600 });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      if (lockIsStale(lock)) rmSync(lock, { force: true });
      else if (Date.now() > deadline)
        throw new CliError(`${lock} is held by another relayctl: remove it if none is running`, EXIT.failed);
      else await new Promise((r) => setTimeout(r, 25 + Math.random() * 50));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { force: true });
  }
}
