// RELAYCTL_APPS_URL: the URL template that gives every application a default
// hostname, `http://{app}.localhost:8000` in dev or `https://{app}.apps.example.com`
// behind a wildcard DNS record. Pure functions: the template's parse (at boot,
// config.ts), the application name's DNS label, and the URLs an application is
// served at. Who holds a hostname when two names map to one is hosts.ts.
import { normalizeFqdn, validFqdn } from "@relayctl/reverse-proxy-sync";

export interface AppsUrl {
  /** The template as given (for messages and docs). */
  template: string;
  scheme: "http" | "https";
  /** What follows `{app}.` in the host, lower case, no trailing dot. */
  domain: string;
  /** The port when the template names one that is not the scheme's default; "" otherwise. */
  port: string;
}

// `{app}` is the whole first label: a label built around it could pass 63 characters,
// and a template without it would give every application the same hostname.
const TEMPLATE = /^(https?):\/\/\{app\}\.([^/:?#@\s{}]+?)\.?(?::(\d{1,5}))?\/?$/i;

const EXAMPLE = "http://{app}.localhost:8000 or https://{app}.apps.example.com";

/** The parsed template, or a one-line reason it is refused. */
export function parseAppsUrl(value: string): AppsUrl | string {
  const m = TEMPLATE.exec(value.trim());
  if (!m) {
    return `must be http(s)://{app}.<domain>[:port] with {app} as the first label and no path (${EXAMPLE}); got '${value.slice(0, 200)}'`;
  }
  const scheme = m[1]!.toLowerCase() as AppsUrl["scheme"];
  const domain = normalizeFqdn(m[2]!);
  if (!validFqdn(`x.${domain}`)) {
    return `'${m[2]}' is not a domain name (RFC 1123 labels) (${EXAMPLE})`;
  }
  const portNumber = m[3] === undefined ? undefined : Number(m[3]);
  if (portNumber !== undefined && (portNumber < 1 || portNumber > 65535)) {
    return `port ${m[3]} is not 1 to 65535`;
  }
  const isDefault = portNumber === (scheme === "https" ? 443 : 80);
  const port = portNumber === undefined || isDefault ? "" : String(portNumber);
  return { template: value.trim(), scheme, domain, port };
}

/** Longest DNS label (RFC 1035). */
const MAX_LABEL = 63;

/**
 * An application's name as one DNS label: lower case, every run of other
 * characters one '-', no '-' at either end, at most 63 characters. A name with
 * no letter or digit gets `app-` and the start of its id, so it still has one.
 */
export function appLabel(name: string, id: string): string {
  const label = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+/, "")
    .slice(0, MAX_LABEL)
    .replace(/-+$/, "");
  return label || `app-${id.replace(/-/g, "").slice(0, 8).toLowerCase()}`;
}

/** The hostname the template gives an application; undefined when it would not be a domain name (over 253). */
export function templateHostname(apps: AppsUrl, app: { name: string; id: string }): string | undefined {
  const host = `${appLabel(app.name, app.id)}.${apps.domain}`;
  return validFqdn(host) ? host : undefined;
}

/**
 * Where a browser reaches a hostname. The control plane does not know whether
 * the agent's proxy terminates TLS (the agent does not report it), so the
 * template, the operator's statement of how applications are served, gives the
 * scheme and port; without one, https (what a production proxy serves).
 */
export function urlOf(apps: AppsUrl | undefined, host: string): string {
  if (!apps) return `https://${host}`;
  return `${apps.scheme}://${host}${apps.port ? `:${apps.port}` : ""}`;
}

/**
 * `url` (the default hostname's, else the first domain's) and `urls` (all of
 * them). A wildcard domain names many hosts and none to open: it is not listed.
 */
export function applicationUrls(
  apps: AppsUrl | undefined,
  defaultHost: string | null,
  fqdns: string[],
): { url: string | null; urls: string[] } {
  const hosts = [...(defaultHost ? [defaultHost] : []), ...fqdns.filter((f) => !f.startsWith("*."))];
  const urls = [...new Set(hosts)].map((h) => urlOf(apps, h));
  return { url: urls[0] ?? null, urls };
}
