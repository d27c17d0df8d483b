// An application's preview settings (issue 32), kept as JSON in its `previews`
// column: whether pull requests (and the API) get previews, the hostname
// pattern, the cap, the fork and secret rules, and the containers' limits.
// The pattern's placeholders are {number} (the pull request's number, else the
// key), {key} (`pr-12`, or the name an API preview was given) and {app} (the
// production application's name as a DNS label).
import { normalizeFqdn, validFqdn } from "@relayctl/reverse-proxy-sync";
import { z } from "zod";
import { appLabel } from "../applications/app-url.js";
import { RcError } from "../errors.js";

export interface PreviewSettings {
  enabled: boolean;
  domain_pattern: string | null;
  max: number;
  allow_forks: boolean;
  copy_secrets: boolean;
  memory_mb: number | null;
  cpus: number | null;
}

export const DEFAULT_PREVIEWS: PreviewSettings = {
  enabled: false,
  domain_pattern: null,
  max: 5,
  allow_forks: false,
  copy_secrets: false,
  memory_mb: null,
  cpus: null,
};

export const MAX_PREVIEWS = 50;

export const previewSettingsSchema = z
  .strictObject({
    enabled: z.boolean().optional(),
    domain_pattern: z.string().min(1).max(253).nullable().optional(),
    max: z.int().min(1).max(MAX_PREVIEWS).optional(),
    allow_forks: z.boolean().optional(),
    copy_secrets: z.boolean().optional(),
    memory_mb: z.int().min(6).max(1_048_576).nullable().optional(),
    cpus: z.number().min(0.01).max(1024).nullable().optional(),
  })
  .describe(
    "preview environments of pull requests and the API (docs/previews.md); fields left out stay as they are",
  );

export type PreviewSettingsInput = z.infer<typeof previewSettingsSchema>;

/** The stored JSON with the defaults under it (an application from before previews has none). */
export function previewSettings(stored: string | null | undefined): PreviewSettings {
  if (!stored) return { ...DEFAULT_PREVIEWS };
  return { ...DEFAULT_PREVIEWS, ...(JSON.parse(stored) as Partial<PreviewSettings>) };
}

const PLACEHOLDER = /\{([a-z]+)\}/g;

/** The settings after a change, checked (422 naming the field); JSON to store. */
export function mergePreviewSettings(stored: string | null | undefined, input: PreviewSettingsInput): string {
  const merged = { ...previewSettings(stored), ...input };
  if (merged.domain_pattern !== null) merged.domain_pattern = checkPattern(merged.domain_pattern);
  return JSON.stringify(merged);
}

function checkPattern(raw: string): string {
  const pattern = raw.trim().toLowerCase();
  for (const [, name] of pattern.matchAll(PLACEHOLDER))
    if (!["number", "key", "app"].includes(name!))
      throw new RcError(
        "RC_ERR_VALIDATION",
        `previews.domain_pattern: unknown placeholder '{${name}}' (use {number}, {key} and {app})`,
      );
  if (!pattern.includes("{number}") && !pattern.includes("{key}"))
    throw new RcError(
      "RC_ERR_VALIDATION",
      "previews.domain_pattern: must contain {number} or {key}, so that each preview has its own hostname",
    );
  const sample = fillPattern(pattern, { number: 12345, key: "pr-12345", app: "app" });
  if (sample.startsWith("*.") || !validFqdn(sample))
    throw new RcError(
      "RC_ERR_VALIDATION",
      `previews.domain_pattern: '${raw.slice(0, 253)}' does not give a domain name (e.g. pr-{number}.{app}.preview.example.com)`,
    );
  return pattern;
}

function fillPattern(pattern: string, v: { number: number | null; key: string; app: string }): string {
  return normalizeFqdn(
    pattern
      .replaceAll("{number}", v.number === null ? v.key : String(v.number))
      .replaceAll("{key}", v.key)
      .replaceAll("{app}", v.app),
  );
}

/** The preview's hostname from the parent's pattern, or null (none: the default hostname of its name). */
export function previewHost(
  s: PreviewSettings,
  parent: { name: string; id: string },
  key: string,
  number: number | null,
): string | null {
  if (!s.domain_pattern) return null;
  const host = fillPattern(s.domain_pattern, { number, key, app: appLabel(parent.name, parent.id) });
  if (!validFqdn(host))
    throw new RcError(
      "RC_ERR_VALIDATION",
      `previews.domain_pattern gives '${host.slice(0, 300)}' for preview '${key}', which is not a domain name`,
    );
  return host;
}
