// The control plane's one error catalogue: a stable code per failure, its HTTP
// status and a human detail. Domain code (stores, the bus, the operations
// service, handlers) throws RcError with a code and never picks a status; this
// table alone maps a code to its status, and the api's error handler
// (http/errors.ts) turns the error into `{"detail": ...}` with it. Never match on
// messages.

export const ERRORS = {
  RC_ERR_UNAUTHENTICATED: { status: 401, detail: "missing or invalid credentials" },
  RC_ERR_KEY_RETIRED: {
    status: 401,
    detail: "Tenant Integration Keys (rk_t_) are retired: use an rca_ Automation key or OAuth",
  },
  RC_ERR_KEY_REVOKED: { status: 401, detail: "automation key has been revoked" },
  RC_ERR_KEY_EXPIRED: { status: 401, detail: "automation key has expired" },
  RC_ERR_API_KEY_REVOKED: { status: 401, detail: "API key has been revoked" },
  RC_ERR_JOIN_TOKEN_INVALID: { status: 401, detail: "join token is invalid, already used or expired" },
  RC_ERR_FORBIDDEN: { status: 403, detail: "not allowed for this key" },
  RC_ERR_IP_NOT_ALLOWED: { status: 403, detail: "caller IP is not in this key's IP allowlist" },
  RC_ERR_SERVER_NOT_FOUND: { status: 404, detail: "server not found" },
  RC_ERR_OPERATION_NOT_FOUND: { status: 404, detail: "operation not found" },
  RC_ERR_KEY_NOT_FOUND: { status: 404, detail: "automation key not found" },
  RC_ERR_ROUTE_NOT_FOUND: { status: 404, detail: "route not found" },
  RC_ERR_CREDENTIAL_NOT_FOUND: { status: 404, detail: "registry credential not found" },
  RC_ERR_CREDENTIAL_NAME_TAKEN: {
    status: 409,
    detail: "a registry credential with this name already exists",
  },
  RC_ERR_CREDENTIAL_UNREADABLE: {
    status: 409,
    detail: "the stored registry credential cannot be decrypted with the current master key: store it again",
  },
  RC_ERR_APPLICATION_NOT_FOUND: { status: 404, detail: "application not found" },
  RC_ERR_RELEASE_NOT_FOUND: { status: 404, detail: "release not found" },
  RC_ERR_RELEASE_IMAGE_GONE: {
    status: 409,
    detail: "the release's image is no longer kept on the server: deploy that commit again",
  },
  RC_ERR_NO_PREVIOUS_RELEASE: {
    status: 409,
    detail: "the application has no release before the live one to roll back to",
  },
  RC_ERR_ROLLOUT_RUNNING: {
    status: 409,
    detail: "a rollout of this application is running: wait for it to finish",
  },
  RC_ERR_ROLLOUT_NOT_FOUND: { status: 404, detail: "rollout not found" },
  RC_ERR_APPLICATION_NAME_TAKEN: { status: 409, detail: "an application with this name already exists" },
  RC_ERR_FQDN_TAKEN: {
    status: 409,
    detail: "a domain name is already bound to another application on this server",
  },
  RC_ERR_SESSION_INVALID: { status: 401, detail: "invalid external-deploy session token" },
  RC_ERR_SESSION_EXPIRED: { status: 401, detail: "external-deploy session has expired: open a new one" },
  RC_ERR_SESSION_ENDED: { status: 401, detail: "external-deploy session has been deleted: open a new one" },
  RC_ERR_SESSION_NOT_FOUND: { status: 404, detail: "external-deploy session not found" },
  RC_ERR_NO_APPLICATION_MATCHED: {
    status: 400,
    detail: "no container name matched an application's linked_container_name",
  },
  RC_ERR_PROVIDER_NOT_BOUND: { status: 404, detail: "the server has no cloud provider binding" },
  RC_ERR_SERVER_NOT_CONNECTED: { status: 409, detail: "server is not connected" },
  RC_ERR_VALIDATION: { status: 422, detail: "validation error" },
  RC_ERR_RATE_LIMITED: { status: 429, detail: "rate limit exceeded" },
  RC_ERR_BAD_REQUEST: { status: 400, detail: "bad request" },
  RC_ERR_PAYLOAD_TOO_LARGE: { status: 413, detail: "request body too large" },
  RC_ERR_UNSUPPORTED_MEDIA_TYPE: { status: 415, detail: "unsupported content type: send application/json" },
  RC_ERR_BUS_UNAVAILABLE: { status: 503, detail: "job bus unavailable, retry later" },
  RC_ERR_MASTER_KEY_UNSET: {
    status: 503,
    detail: "registry credentials are unavailable: the control plane has no RELAYCTL_MASTER_KEY",
  },
  RC_ERR_STORE_UNAVAILABLE: { status: 503, detail: "database unavailable: nothing was run, retry later" },
  RC_ERR_INTERNAL: { status: 500, detail: "internal error" },
  RC_ERR_DEPLOYMENT_NOT_FOUND: { status: 404, detail: "deployment not found" },
  RC_ERR_TENANT_NOT_FOUND: { status: 404, detail: "tenant not found" },
  RC_ERR_ENV_VAR_NOT_FOUND: { status: 404, detail: "environment variable is not set" },
  RC_ERR_NOT_DEPLOYABLE: {
    status: 422,
    detail: "the application has nothing to deploy from: set git_repository or an image build",
  },
  RC_ERR_PREVIEW_NOT_FOUND: { status: 404, detail: "preview not found" },
  RC_ERR_PREVIEWS_DISABLED: {
    status: 409,
    detail: "previews are not enabled for this application: set previews.enabled first",
  },
  RC_ERR_ACCESS_TOKEN_EXPIRED: { status: 401, detail: "OAuth access token has expired: refresh it" },
  RC_ERR_ACCESS_TOKEN_REVOKED: { status: 401, detail: "OAuth access token has been revoked: log in again" },
  RC_ERR_ROLE_FORBIDDEN: {
    status: 403,
    detail: "your role (or your token's OAuth scopes) does not allow this",
  },
  RC_ERR_LAST_OWNER: {
    status: 409,
    detail: "the organization's last owner cannot step down: make another person owner first",
  },
  RC_ERR_CSRF: { status: 403, detail: "missing or invalid CSRF token: reload the page" },
  RC_ERR_USER_NOT_FOUND: { status: 404, detail: "user not found" },
  RC_ERR_INVITE_INVALID: { status: 404, detail: "invite is unknown, already used or expired" },
  RC_ERR_EMAIL_TAKEN: { status: 409, detail: "a user of this tenant already has this e-mail address" },
  RC_ERR_SIGNIN_LIMITED: { status: 429, detail: "too many sign-in attempts: wait and try again" },
  RC_ERR_GITHUB_UNCONFIGURED: {
    status: 503,
    detail: "the GitHub App is not configured on this control plane (RELAYCTL_GITHUB_APP_ID and friends)",
  },
  RC_ERR_WEBHOOK_SIGNATURE: {
    status: 401,
    detail: "missing or wrong X-Hub-Signature-256 for this body and the App's webhook secret",
  },
  RC_ERR_WEBHOOK_BUSY: {
    status: 503,
    detail:
      "too many webhook bodies are being read before their signature is checked: retry after Retry-After",
  },
  RC_ERR_GITHUB_STATE_INVALID: {
    status: 400,
    detail: "the install state is invalid, expired or already used: ask relayctl for a new install link",
  },
  RC_ERR_GITHUB_NOT_AUTHORIZED: {
    status: 403,
    detail:
      "the GitHub user who came back from the install could not be shown to have access to this installation: install again from a new install link",
  },
  RC_ERR_GITHUB_INSTALLATION_TAKEN: {
    status: 409,
    detail: "this GitHub App installation is already bound to another tenant",
  },
  RC_ERR_GITHUB_REPOSITORY_NOT_FOUND: {
    status: 404,
    detail: "no repository with this id is reachable through an installation bound to your tenant",
  },
  RC_ERR_GITHUB_API: { status: 502, detail: "GitHub's API did not answer as expected" },
  RC_ERR_NOT_READY: { status: 503, detail: "not ready: a dependency is unreachable" },
  RC_ERR_API_KEY_NOT_FOUND: { status: 404, detail: "API key not found" },
  RC_ERR_WEB_SESSION_NOT_FOUND: { status: 404, detail: "session not found" },
  RC_ERR_GRANT_NOT_FOUND: { status: 404, detail: "CLI or MCP login not found" },
  RC_ERR_PERSON_ONLY: {
    status: 403,
    detail: "this is about a signed-in person: use the session or an OAuth token, not an API key",
  },
  RC_ERR_AGENT_BUNDLE_NOT_FOUND: { status: 404, detail: "agent bundle file not found" },
  RC_ERR_SERVER_HAS_APPLICATIONS: {
    status: 409,
    detail:
      "the server still has applications: delete them or move them to another server first (removing it would leave their containers running with no agent to manage them)",
  },
  RC_ERR_INSECURE_INSTALL_URL: {
    status: 409,
    detail:
      "the install command would fetch the installer over plain http from an address that is not loopback: set RELAYCTL_PUBLIC_URL to an https:// URL",
  },
  RC_ERR_AGENT_BUNDLE_UNAVAILABLE: {
    status: 503,
    detail: "no agent bundle to serve: the control plane's agent bundles are not built",
  },
  RC_ERR_CLI_BUNDLE_NOT_FOUND: { status: 404, detail: "CLI bundle file not found" },
  RC_ERR_CLI_BUNDLE_UNAVAILABLE: {
    status: 503,
    detail: "no CLI bundle to serve: the control plane's CLI bundle is not built",
  },
  RC_ERR_DASHBOARD_NOT_BUILT: {
    status: 503,
    detail: "the dashboard is not built on this control plane: run `make build` (web/dist is missing)",
  },
  RC_ERR_APPLICATION_NOT_LIVE: {
    status: 409,
    detail: "the application has no live container: deploy it first",
  },
  RC_ERR_FORGE_NOT_FOUND: { status: 404, detail: "forge connection not found" },
  RC_ERR_FORGE_NAME_TAKEN: { status: 409, detail: "a forge connection with this name already exists" },
  RC_ERR_FORGE_IN_USE: {
    status: 409,
    detail: "the forge connection is linked to applications: unlink them first",
  },
  RC_ERR_FORGE_WEBHOOK_SECRET: {
    status: 401,
    detail: "missing or wrong X-Gitlab-Token, X-Gitea-Signature or X-Forgejo-Signature for this connection",
  },
} as const satisfies Record<string, { status: number; detail: string }>;

export type ErrorCode = keyof typeof ERRORS;

/**
 * Answers that say an optional part is switched off by the operator's settings,
 * not a fault: the process says so once at boot, and the error handler does not
 * log each request that meets it (issue 31: the dashboard's GitHub requests
 * logged 36 stack traces in 10 minutes of `make dev`).
 */
export const SWITCHED_OFF: ReadonlySet<ErrorCode> = new Set<ErrorCode>(["RC_ERR_GITHUB_UNCONFIGURED"]);

export class RcError extends Error {
  readonly code: ErrorCode;
  readonly detail: string;
  /** Extra fields of the error body, e.g. `operation_id` of a 409. */
  readonly extra: Record<string, unknown>;

  constructor(
    code: ErrorCode,
    detail?: string,
    opts: { cause?: unknown; extra?: Record<string, unknown> } = {},
  ) {
    const entry = ERRORS[code];
    super(detail ?? entry.detail, { cause: opts.cause });
    this.name = "RcError";
    this.code = code;
    this.detail = detail ?? entry.detail;
    this.extra = opts.extra ?? {};
  }

  /** The HTTP status of this error's code, from the catalogue. */
  get status(): number {
    return ERRORS[this.code].status;
  }

  body(): Record<string, unknown> {
    return { detail: this.detail, ...this.extra };
  }
}
