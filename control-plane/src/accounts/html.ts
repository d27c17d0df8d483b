// The few server-rendered pages of sign-in and approval (device, authorization): plain HTML with
// every interpolated value escaped, no script, and headers that keep them out
// of frames and caches.
import type { FastifyReply } from "fastify";

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
      `default-src 'none'; style-src 'unsafe-inline'; form-action ${["'self'", ...formTargets].join(" ")}; frame-ancestors 'none'`,
    )
    .header("referrer-policy", "no-referrer")
    .send(
      html`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title} · relayctl</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}label,input,button{display:block;margin:.4rem 0}input{width:100%}.error{color:#a00}code{font-size:1.3rem}</style>
</head><body><h1>${title}</h1>${body}</body></html>`.text,
    );
}

export const csrfField = (token: string) => html`<input type="hidden" name="csrf_token" value="${token}">`;
