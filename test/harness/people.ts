// People in system tests: the operator's first owner (the password on stdin, as
// an operator would pipe it), and a browser that signs in on /login and answers
// the device flow's verification page over real HTTP — cookies, the pages'
// hidden CSRF fields and redirects handled the way a browser does.
import { randomBytes } from "node:crypto";
import { run } from "@relayctl/devkit";
import { TEST_MASTER_KEY } from "./control-plane";
import { cleanEnv } from "./process";
import { SERVER_MAIN, parseJsonOutput } from "./programs";

export interface Person {
  email: string;
  password: string;
  id: string;
}

/** `relayctl-server admin create-owner`, the password on stdin. */
export async function createOwner(databaseUrl: string, tenant: string): Promise<Person> {
  const email = `owner-${randomBytes(4).toString("hex")}@example.test`;
  const password = `pw-${randomBytes(12).toString("base64url")}`;
  const { stdout } = await run(
    process.execPath,
    [SERVER_MAIN, "admin", "create-owner", "--tenant", tenant, "--email", email],
    {
      env: cleanEnv({
        RELAYCTL_DATABASE_URL: databaseUrl,
        RELAYCTL_LOG_LEVEL: "warn",
        RELAYCTL_MASTER_KEY: TEST_MASTER_KEY,
      }),
      input: `${password}\n`,
      timeoutMs: 30_000,
    },
  );
  return { email, password, id: String(parseJsonOutput(stdout, "create-owner").id) };
}

export interface Page {
  status: number;
  url: string;
  text: string;
  headers: Headers;
}

/** The value of the hidden input `name` in a page (first one). */
export function hiddenField(html: string, name: string): string {
  const m = new RegExp(`<input type="hidden" name="${name}" value="([^"]*)"`).exec(html);
  if (!m) throw new Error(`no hidden field '${name}' in page:\n${html.slice(0, 2000)}`);
  return m[1]
    .replace(/&amp;/g, "&")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">");
}

/** A cookie jar and redirect-following client over fetch. */
export class Browser {
  readonly cookies = new Map<string, string>();

  constructor(readonly baseUrl: string) {}

  private remember(headers: Headers): void {
    for (const c of headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(";");
      const i = pair.indexOf("=");
      const name = pair.slice(0, i).trim();
      const value = decodeURIComponent(pair.slice(i + 1).trim());
      const expired = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (expired || value === "") this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  async request(
    firstMethod: string,
    path: string,
    form?: Record<string, string>,
    follow = true,
  ): Promise<Page> {
    let method = firstMethod;
    let url = new URL(path, this.baseUrl).toString();
    let body: string | undefined = form ? new URLSearchParams(form).toString() : undefined;
    for (let hops = 0; hops < 10; hops++) {
      const headers: Record<string, string> = {};
      if (this.cookies.size)
        headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("; ");
      if (body !== undefined) headers["content-type"] = "application/x-www-form-urlencoded";
      const res = await fetch(url, {
        method,
        headers,
        body,
        redirect: "manual",
        signal: AbortSignal.timeout(30_000),
      });
      this.remember(res.headers);
      const location = res.headers.get("location");
      if (follow && location && res.status >= 300 && res.status < 400) {
        url = new URL(location, url).toString();
        method = "GET";
        body = undefined;
        await res.arrayBuffer();
        continue;
      }
      return { status: res.status, url, text: await res.text(), headers: res.headers };
    }
    throw new Error(`too many redirects from ${path}`);
  }

  get(path: string): Promise<Page> {
    return this.request("GET", path);
  }

  post(path: string, form: Record<string, string>): Promise<Page> {
    return this.request("POST", path, form);
  }

  /** Opens /login (or a page that leads there), fills and submits the form. */
  async signIn(person: { email: string; password: string }, path = "/login"): Promise<Page> {
    const page = await this.get(path);
    if (!page.text.includes('action="/login"')) throw new Error(`no sign-in form at ${path}: ${page.status}`);
    return this.post("/login", {
      csrf_token: hiddenField(page.text, "csrf_token"),
      next: hiddenField(page.text, "next"),
      email: person.email,
      password: person.password,
    });
  }

  /** On a signed-in browser: opens the verification URI, continues, and approves or denies. */
  async answerDevice(verificationUriComplete: string, decision: "approve" | "deny"): Promise<Page> {
    const form = await this.get(verificationUriComplete);
    if (form.status !== 200) throw new Error(`/device: ${form.status} ${form.text.slice(0, 500)}`);
    const confirm = await this.post("/device", {
      csrf_token: hiddenField(form.text, "csrf_token"),
      user_code: /name="user_code" value="([^"]*)"/.exec(form.text)?.[1] ?? "",
    });
    if (confirm.status !== 200)
      throw new Error(`POST /device: ${confirm.status} ${confirm.text.slice(0, 500)}`);
    return this.post("/device/decision", {
      csrf_token: hiddenField(confirm.text, "csrf_token"),
      user_code: hiddenField(confirm.text, "user_code"),
      decision,
    });
  }
}

/** POSTs form parameters (the OAuth endpoints' encoding) and parses the JSON answer. */
export async function postForm(baseUrl: string, path: string, params: Record<string, string>) {
  const res = await fetch(`${baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(params).toString(),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text);
  } catch {
    // empty (revoke) or not JSON
  }
  return { status: res.status, json, text, headers: res.headers };
}

/**
 * A whole device flow for `browser`'s signed-in person: the token answer. `scope`: what the
 * CLI asks for by default (every scope: the person's role decides), or less.
 */
export async function deviceTokens(baseUrl: string, browser: Browser, scope = "read deploy exec admin") {
  const d = await postForm(baseUrl, "/oauth/device/code", { client_id: "relayctl-cli", scope });
  await browser.answerDevice(String(d.json.verification_uri_complete), "approve");
  const r = await postForm(baseUrl, "/oauth/token", {
    grant_type: "urn:ietf:params:oauth:grant-type:device_code",
    device_code: String(d.json.device_code),
    client_id: "relayctl-cli",
  });
  if (r.status !== 200) throw new Error(`token: ${r.status} ${r.text}`);
  return r.json as { access_token: string; refresh_token: string };
}
