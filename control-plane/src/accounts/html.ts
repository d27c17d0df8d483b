// The few server-rendered pages of sign-in and approval (device, authorization): plain HTML with
// every interpolated value escaped, no script, and headers that keep them out
// of frames and caches. They wear the dashboard's look: its built stylesheet
// (web/dist, named in its index.html with a content hash), linked, since the CSP
// allows styles from this site only (issue 31: they were browser defaults).
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { FastifyReply } from "fastify";
import { WEB_DIST } from "../dashboard/static.js";

export function esc(value: unknown): string {
  return String(value).replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string,
  );
}

/** A tagged template that escapes every value unless it is already `Html`. */
export class Html {
  constructor(readonly text: string) {}
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0];
  values.forEach((v, i) => {
    const part = Array.isArray(v)
      ? v.map((x) => (x instanceof Html ? x.text : esc(x))).join("")
      : v instanceof Html
        ? v.text
        : v === undefined || v === null || v === false
          ? ""
          : esc(v);
    out += part + strings[i + 1];
  });
  return new Html(out);
}

let sheet: { mtimeMs: number; href: string | null } | undefined;

/**
 * The dashboard stylesheet's URL, read from web/dist/index.html again only when a
 * build changed it (`make dev` rebuilds while the control plane runs); null
 * without a build: the pages still work, unstyled.
 */
export function dashboardStylesheet(dist = WEB_DIST): string | null {
  const index = join(dist, "index.html");
  let mtimeMs: number;
  try {
    mtimeMs = statSync(index).mtimeMs;
  } catch {
    return null;
  }
  if (sheet?.mtimeMs !== mtimeMs) {
    const m = /<link rel="stylesheet" href="(\/app\/assets\/[\w.-]+\.css)">/.exec(
      readFileSync(index, "utf8"),
    );
    sheet = { mtimeMs, href: m?.[1] ?? null };
  }
  return sheet.href;
}

/**
 * `formTargets`: origins besides this site a form's answer may redirect to
 * (browsers apply CSP form-action to the redirects after a post, too).
 */
export function sendPage(
  reply: FastifyReply,
  status: number,
  title: string,
  body: Html,
  formTargets: string[] = [],
) {
  return reply
    .status(status)
    .header("content-type", "text/html; charset=utf-8")
    .header("cache-control", "no-store")
    .header("x-frame-options", "DENY")
    .header(
      "content-security-policy",
      `default-src 'none'; style-src 'self'; img-src 'self'; form-action ${["'self'", ...formTargets].join(" ")}; frame-ancestors 'none'`,
    )
    .header("referrer-policy", "no-referrer")
    .send(page(title, body).text);
}

function page(title: string, body: Html): Html {
  const css = dashboardStylesheet();
  return html`<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · relayctl</title>${css ? html`<link rel="stylesheet" href="${css}">` : ""}
</head><body class="signin"><header class="top"><a class="brand" href="/">relayctl</a></header>
<main class="signin-main"><div class="card"><h1>${title}</h1>${body}</div></main></body></html>`;
}

export const csrfField = (token: string) => html`<input type="hidden" name="csrf_token" value="${token}">`;
