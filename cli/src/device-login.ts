// `relayctl login`: the OAuth 2.0 device authorization grant (RFC 8628) as its
// client. Prints the code and the address, opens a browser when there is one,
// polls at the server's interval and adds 5 s at each slow_down (§3.5), and ends
// on approval (tokens saved 0600), access_denied or expired_token.
import { spawn } from "node:child_process";
import { CLIENT_ID, errorLine, fetchOrFail } from "./client.js";
import { type Credentials, saveCredentials } from "./credentials.js";
import { CliError, EXIT, authError } from "./errors.js";

interface DeviceAnswer {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete?: string;
  expires_in: number;
  interval?: number;
}

async function postForm(url: string, params: Record<string, string>) {
  const res = await fetchOrFail(url, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
    body: new URLSearchParams(params),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text);
  } catch {
    // an error page from a proxy: reported through errorLine
  }
  return { res, text, json };
}

/** Best effort: a graphical session gets a browser tab; a server over ssh does not. */
function openBrowser(url: string): boolean {
  if (
    process.env.RELAYCTL_NO_BROWSER ||
    !(process.env.DISPLAY || process.env.WAYLAND_DISPLAY || process.platform === "darwin")
  )
    return false;
  const cmd = process.platform === "darwin" ? "open" : "xdg-open";
  try {
    const child = spawn(cmd, [url], { stdio: "ignore", detached: true });
    child.on("error", () => {});
    child.unref();
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The OAuth scopes the CLI asks for: its commands read, deploy, run commands and
 * manage (applications, keys, people), so all of them; the person's role still
 * decides what the login may do. `relayctl login --scope read` asks for less.
 */
export const CLI_SCOPES = "read deploy exec admin";

export async function deviceLogin(
  baseUrl: string,
  opts: { browser: boolean; scope?: string },
): Promise<Credentials> {
  const start = await postForm(`${baseUrl}/oauth/device/code`, {
    client_id: CLIENT_ID,
    scope: opts.scope ?? CLI_SCOPES,
  });
  if (!start.res.ok)
    throw new CliError(
      errorLine(start.res.status, start.text),
      start.res.status >= 500 ? EXIT.server : EXIT.auth,
    );
  const d = start.json as unknown as DeviceAnswer;
  const target = d.verification_uri_complete ?? d.verification_uri;
  process.stderr.write(`To sign in, open ${d.verification_uri} and enter the code ${d.user_code}\n`);
  if (d.verification_uri_complete) process.stderr.write(`(or open ${d.verification_uri_complete})\n`);
  if (opts.browser && openBrowser(target)) process.stderr.write("A browser window was opened.\n");
  process.stderr.write("Waiting for approval...\n");

  let interval = (d.interval ?? 5) * 1000;
  const deadline = Date.now() + d.expires_in * 1000;
  while (Date.now() < deadline) {
    await sleep(interval);
    const r = await postForm(`${baseUrl}/oauth/token`, {
      grant_type: "urn:ietf:params:oauth:grant-type:device_code",
      device_code: d.device_code,
      client_id: CLIENT_ID,
    });
    if (r.res.ok) {
      const t = r.json as { access_token: string; refresh_token: string; expires_in: number };
      const creds: Credentials = {
        url: baseUrl,
        access_token: t.access_token,
        refresh_token: t.refresh_token,
        expires_at: Date.now() + t.expires_in * 1000,
        lifetime_ms: t.expires_in * 1000,
        client_id: CLIENT_ID,
      };
      await saveCredentials(creds);
      return creds;
    }
    const error = String(r.json.error ?? "");
    if (error === "authorization_pending") continue;
    if (error === "slow_down") {
      interval += 5000;
      continue;
    }
    if (error === "access_denied") throw authError("the sign-in request was denied");
    if (error === "expired_token")
      throw authError("the code expired before it was approved: run 'relayctl login' again");
    throw new CliError(
      `login failed: ${errorLine(r.res.status, r.text)}`,
      r.res.status >= 500 ? EXIT.server : EXIT.auth,
    );
  }
  throw authError("the code expired before it was approved: run 'relayctl login' again");
}
