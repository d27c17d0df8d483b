// Where the CLI keeps a login: `credentials.json` in the user's config dir
// ($RELAYCTL_CONFIG_DIR, else $XDG_CONFIG_HOME/relayctl, else ~/.config/relayctl),
// mode 0600 in a 0700 directory, replaced atomically (write a temp file, rename) so
// a crash mid-refresh never leaves half a token file.
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

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

export function saveCredentials(c: Credentials): void {
  const dir = configDir();
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = join(dir, `.credentials.${randomBytes(6).toString("hex")}.tmp`);
  writeFileSync(tmp, `${JSON.stringify(c, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600); // a umask cannot widen it, but a pre-existing file's mode could
  renameSync(tmp, file());
}

export function removeCredentials(): void {
  rmSync(file(), { force: true });
}
