// Settings of people's sign-in and the OAuth authorization server, parsed with
// the rest of the config at boot (config.ts calls this once). Every variable has
// its default here; docs/process-interfaces.md mirrors them.
import { z } from "zod";

const seconds = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, "must be a whole number of seconds")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const schema = z.object({
  /**
   * The address people and the CLI reach the api at, e.g. https://relayctl.example.com:
   * the OAuth issuer and the device flow's verification_uri. @default the request's
   * own scheme and Host
   */
  RELAYCTL_PUBLIC_URL: z
    .url({ protocol: /^https?$/ })
    .transform((u) => u.replace(/\/+$/, ""))
    .optional(),
  /** Lifetime of an OAuth access token (rco_). @default 900 */
  RELAYCTL_OAUTH_ACCESS_TOKEN_TTL_SECONDS: seconds(1, 24 * 3600).default(900),
  /** Lifetime of an OAuth refresh token (rcr_); each rotation starts a new one. @default 2592000 (30 days) */
  RELAYCTL_OAUTH_REFRESH_TOKEN_TTL_SECONDS: seconds(60, 365 * 24 * 3600).default(30 * 24 * 3600),
  /** Lifetime of a device authorization (device_code and user_code). @default 600 */
  RELAYCTL_OAUTH_DEVICE_CODE_TTL_SECONDS: seconds(1, 3600).default(600),
  /** The device flow's minimum polling interval (RFC 8628 `interval`). @default 5 */
  RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS: seconds(1, 60).default(5),
  /** Lifetime of a web sign-in session. @default 43200 (12 hours) */
  RELAYCTL_WEB_SESSION_TTL_SECONDS: seconds(60, 30 * 24 * 3600).default(12 * 3600),
});

export interface AccountsConfig {
  publicUrl: string | undefined;
  accessTokenTtlSeconds: number;
  refreshTokenTtlSeconds: number;
  deviceCodeTtlSeconds: number;
  deviceIntervalSeconds: number;
  webSessionTtlSeconds: number;
}

/** Returns the settings, or the first problem as "VARIABLE: message". */
export function parseAccountsConfig(raw: Record<string, unknown>): AccountsConfig | string {
  const r = schema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0];
    return `${issue.path.join(".")}: ${issue.message}`;
  }
  const c = r.data;
  return {
    publicUrl: c.RELAYCTL_PUBLIC_URL,
    accessTokenTtlSeconds: c.RELAYCTL_OAUTH_ACCESS_TOKEN_TTL_SECONDS,
    refreshTokenTtlSeconds: c.RELAYCTL_OAUTH_REFRESH_TOKEN_TTL_SECONDS,
    deviceCodeTtlSeconds: c.RELAYCTL_OAUTH_DEVICE_CODE_TTL_SECONDS,
    deviceIntervalSeconds: c.RELAYCTL_OAUTH_DEVICE_INTERVAL_SECONDS,
    webSessionTtlSeconds: c.RELAYCTL_WEB_SESSION_TTL_SECONDS,
  };
}
