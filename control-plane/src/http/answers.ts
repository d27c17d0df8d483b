// The documented answers of the API's JSON endpoints, named, for the routes'
// declarations (`responses` in http/route.ts) and so the OpenAPI document. Objects
// are loose (`additionalProperties` allowed): the fields listed are promised, and
// a field added later breaks no client or test. The api serializes answers with
// JSON.stringify whatever these say (http/validation.ts): a schema that drifted
// must never turn a working answer into a 500 or drop a field;
// test/openapi.test.ts checks real answers against them instead.
import { z } from "zod";

const o = z.looseObject;
const iso = z.string().describe("ISO 8601 date-time (UTC)");
const isoOrNull = iso.nullable();
const uuid = z.string().describe("UUID");

/** `{"detail": "..."}`, sometimes with fields of the error (`operation_id` of a 409, `retry_after` of a 429). */
export const errorBody = o({ detail: z.string() }).meta({ id: "Error" });

export const running = o({ operation_id: uuid, status: z.literal("running") }).meta({
  id: "OperationRunning",
});
export const finished = o({
  operation_id: uuid,
  status: z.enum(["completed", "failed", "timeout"]),
  exit_code: z.int(),
  stdout: z.string(),
  stderr: z.string(),
  duration_ms: z.number(),
}).meta({ id: "OperationFinished" });

export const operation = o({
  operation_id: uuid,
  operation_type: z.string(),
  server_id: uuid,
  server_name: z.string(),
  status: z.enum(["running", "completed", "failed", "timeout"]),
  result: o({
    exit_code: z.int(),
    stdout: z.string(),
    stderr: z.string(),
    duration_ms: z.number(),
  }).nullable(),
  run_id: z.string().nullable(),
  started_at: iso,
  completed_at: isoOrNull,
}).meta({ id: "Operation" });

/** A listing's output preview: head, tail when cut, full size. */
const preview = {
  stdout: z.string(),
  stdout_tail: z.string().nullable(),
  stdout_bytes: z.int(),
  stdout_truncated: z.boolean(),
  stderr: z.string(),
  stderr_tail: z.string().nullable(),
  stderr_bytes: z.int(),
  stderr_truncated: z.boolean(),
};

export const operationInList = o({
  ...operation.shape,
  result: o({ exit_code: z.int(), ...preview, duration_ms: z.number() }).nullable(),
}).meta({ id: "OperationPreview" });

export const automationKey = o({
  id: uuid,
  name: z.string(),
  servers: z.array(z.string()),
  operations: z.array(z.string()),
  allowed_credential_ids: z.array(z.string()),
  ip_allowlist: z.array(z.string()),
  rate_limit: z.int(),
  expires_at: isoOrNull,
  created_at: iso,
}).meta({ id: "AutomationKey" });

export const auditEvent = o({
  seq: z.int(),
  event_type: z.string(),
  operation_id: z.string().nullable(),
  key_id: z.string().nullable(),
  server_id: z.string().nullable(),
  run_id: z.string().nullable(),
  created_at: iso,
  payload: z.record(z.string(), z.unknown()),
  actor: o({
    type: z
      .string()
      .describe("user, api_key, automation_key, oauth_token, operator, agent, github or system"),
    id: z.string().nullable().describe("the user's, key's or (an agent) server's id"),
    name: z.string(),
  }).describe("who acted (audit/actor.ts)"),
  prev_hash: z.string().nullable(),
  hash: z.string(),
  outcome: o({
    status: z.string(),
    exit_code: z.int().nullable(),
    ...preview,
    duration_ms: z.number().nullable(),
    completed_at: isoOrNull,
  }).optional(),
}).meta({ id: "AuditEvent" });

const build = z
  .union([
    o({ type: z.literal("dockerfile"), dockerfile: z.string(), context: z.string() }),
    o({
      type: z.literal("image"),
      image: z.string(),
      registry_credential_id: z.string().nullable().optional(),
    }),
  ])
  .nullable();

export const release = o({
  deployment_id: uuid.describe("the deployment that made it (a rollback's own deployment for a rollback)"),
  live: z.boolean().describe("it serves now"),
  image: z.string().nullable().describe("the image reference it ran"),
  image_id: z.string().nullable().describe("the image by the engine's id (sha256:...)"),
  image_kept: z
    .boolean()
    .describe(
      "its image is still on the server (one of the newest keep_releases releases): it can be rolled back to",
    ),
  config_hash: z
    .string()
    .nullable()
    .describe(
      "HMAC-SHA256 of what it ran with (env names and values, overrides included; port; health check): equal hashes, equal configuration",
    ),
  commit_sha: z.string().nullable(),
  commit_message: z.string().nullable(),
  rollback_of: uuid.nullable().describe("for a rollback: the release it started again"),
  triggered_by: o({ type: z.string(), id: z.string().nullable(), name: z.string().nullable() }),
  since: iso.describe("when it began serving (its switch)"),
  urls: z.array(z.string()).describe("the URLs it serves (the live release only; empty for others)"),
  fqdns: z.array(z.string()).describe("the route's hostnames when it was deployed"),
}).meta({ id: "Release" });

export const releaseList = o({ releases: z.array(release) }).meta({ id: "ReleaseList" });

export const application = o({
  id: uuid,
  name: z.string(),
  server_id: uuid,
  server_name: z.string().optional(),
  linked_container_name: z.string(),
  container_port: z.int(),
  pin_port: z.boolean(),
  fqdns: z.array(z.string()),
  git_repository: z.string().nullable(),
  deploy_branch: z.string(),
  git_credential: o({ username: z.string(), updated_at: iso }).nullable(),
  build,
  health_check_path: z.string(),
  health_check_timeout_seconds: z.int(),
  auto_deploy: z.boolean(),
  deploy_tags: z
    .string()
    .nullable()
    .describe(
      "GitHub tag pushes matching this pattern (e.g. v*) deploy the tag's commit; null: tags do not deploy",
    ),
  watch_paths: z
    .array(z.string())
    .nullable()
    .describe(
      "globs of repository paths: a GitHub push to the deploy branch deploys only when a changed file matches one; null: every push",
    ),
  url: z
    .string()
    .nullable()
    .describe(
      "where it is served: its default hostname (RELAYCTL_APPS_URL) else its first domain; null when it has neither",
    ),
  urls: z
    .array(z.string())
    .describe("every URL of its route: the default hostname's, then its domains' (wildcards left out)"),
  container: o({
    name: z.string().describe("the container the state is of (the live release's, or the newest)"),
    state: z
      .enum(["running", "restarting", "crashed", "stopped", "crash_loop"])
      .describe(
        "running; restarting: the engine is bringing it back after an exit; crashed: it exited on its own and was not brought back; stopped: exit 0 or a stop's SIGTERM (143; a SIGKILL's 137 is a crash); crash_loop: 3 crashes or more within 5 minutes",
      ),
    exit_code: z.int().nullable().describe("its last exit's code while it is not running; null otherwise"),
    restart_count: z
      .int()
      .describe(
        "restarts since this container was created: docker's, or on podman the agent's starts after a crash (an agent restarted counts from 0 again)",
      ),
    last_crash_at: iso.nullable().describe("when it last crashed (the agent's clock); null: never"),
    since: iso.nullable().describe("when the current state began (start or exit)"),
    held_until: iso
      .nullable()
      .describe(
        "a crash loop the agent holds (podman): the container is left down and started again at this time (the agent's clock); null when not held",
      ),
    reported_at: iso.describe("when the agent last reported a change"),
  })
    .nullable()
    .describe(
      "the application's container on its server as the agent reports it (polled every 5 s); null until one is reported (not deployed, or an older agent)",
    ),
  keep_releases: z
    .int()
    .describe(
      "retention: the images of this many newest releases stay on the server for a rollback (default 5)",
    ),
  previews: o({
    enabled: z.boolean(),
    domain_pattern: z.string().nullable(),
    max: z.int(),
    allow_forks: z.boolean(),
    copy_secrets: z.boolean(),
    memory_mb: z.int().nullable(),
    cpus: z.number().nullable(),
  }).describe("preview environments of pull requests and the API (docs/previews.md)"),
  preview_of: uuid
    .nullable()
    .describe(
      "a preview's production application (GET /api/applications/{id}/previews); null for every other",
    ),
  live_release: release
    .nullable()
    .describe("the release serving now (the newest deployment that switched traffic); null before the first"),
  last_deployment: o({
    deployment_id: uuid,
    status: z.enum(["queued", "running", "completed", "failed", "timeout"]),
    commit_ref: z.string().nullable(),
    commit_sha: z.string().nullable(),
    created_at: iso,
    finished_at: isoOrNull,
  })
    .nullable()
    .describe("its newest deployment whatever its outcome (one still running too); null before the first"),
  created_at: iso,
  updated_at: iso,
}).meta({ id: "Application" });

export const routeChange = o({
  status: z
    .enum(["applied", "failed", "pending", "not_live"])
    .describe(
      "applied: the proxy serves the new hostnames; failed: the agent refused (detail); pending: the agent is away or slow, the next deployment or sync applies them; not_live: nothing runs yet",
    ),
  detail: z.string(),
  operation_id: uuid.nullable(),
  fqdns: z.array(z.string()).describe("the route's hostnames sent to the agent"),
}).meta({ id: "RouteChange" });

/** The container engine a server's agent uses (agent.proto EngineStatus). */
const serverEngine = o({
  name: z.string().nullable().describe("docker or podman; null when auto found none working"),
  version: z.string().nullable().describe("the engine's version when ok"),
  ok: z.boolean().describe("the engine answered: deployments and restarts can run"),
  detail: z.string().describe("how it was chosen, or each engine's reason and how to fix it"),
}).meta({ id: "ServerEngine" });

/** The reverse proxy a server's agent writes routes to (agent.proto ProxyStatus). */
const serverProxy = o({
  kind: z.enum(["caddy", "nginx", "traefik", "none"]).describe("RELAYCTL_AGENT_PROXY of the agent"),
  ok: z
    .boolean()
    .describe(
      "the proxy answered the agent's last check (always true for none): a deployment's switch can write its route",
    ),
  detail: z.string().describe("where it was checked, or why it does not answer"),
}).meta({ id: "ServerProxy" });

export const server = o({
  id: uuid,
  name: z.string(),
  hostname: z.string().nullable(),
  agent_version: z.string().nullable(),
  last_seen_at: isoOrNull.describe(
    "the agent's last heartbeat as stored (every 30 s at most while connected)",
  ),
  connected: z.boolean(),
  connected_at: isoOrNull.describe("when the agent's current (or last) stream was opened"),
  booted_at: isoOrNull.describe("when the server's machine booted (its uptime), as the agent last said"),
  engine: serverEngine
    .nullable()
    .describe("the container engine the agent last reported; null when it never did"),
  proxy: serverProxy.nullable().describe("the reverse proxy the agent last reported; null when it never did"),
  labels: z
    .record(z.string(), z.string())
    .describe("k=v labels an application's placement selects by (fleets)"),
}).meta({ id: "Server" });

export const registryCredential = o({
  id: uuid,
  name: z.string(),
  registry_url: z.string(),
  registry_type: z.string(),
  username: z.string(),
  created_at: iso,
}).meta({ id: "RegistryCredential" });

export const deployStarted = o({
  operation_id: uuid,
  status: z.literal("running"),
  deployment_id: uuid,
  rollout_id: uuid
    .optional()
    .describe(
      "a fleet application's rollout (its operation completes with the rollout; deployment_id is the first server's)",
    ),
}).meta({
  id: "DeploymentStarted",
});

export const deployment = o({
  deployment_id: uuid,
  application_id: uuid,
  operation_id: uuid,
  server_id: uuid,
  status: z.enum(["queued", "running", "completed", "failed", "timeout"]),
  trigger: z.string(),
  triggered_by: o({ type: z.string(), id: z.string().nullable(), name: z.string().nullable() }),
  commit_ref: z.string().nullable(),
  commit_sha: z.string().nullable(),
  commit_message: z.string().nullable(),
  commit_author: z.string().nullable(),
  image: z.string().nullable(),
  container_name: z.string().nullable(),
  host_port: z.int().nullable(),
  upstream: z.string().nullable(),
  url: z.string().nullable().describe("the application's URL once this deployment serves it; null otherwise"),
  failed_step: z.string().nullable(),
  error: z.string().nullable(),
  created_at: iso,
  started_at: isoOrNull,
  finished_at: isoOrNull,
  duration_ms: z.number().nullable(),
}).meta({ id: "Deployment" });

const step = o({
  name: z.string(),
  status: z.enum(["running", "succeeded", "failed", "skipped"]),
  started_at: isoOrNull,
  ended_at: isoOrNull,
  duration_ms: z.number().nullable(),
  log: z.string(),
});

export const envNames = o({ variables: z.array(o({ name: z.string(), updated_at: iso })) }).meta({
  id: "EnvNames",
});

export const session = o({
  session_id: uuid,
  session_token: z.string().describe("rds_…, shown once"),
  expires_at: iso,
  applications: z.array(
    o({
      id: uuid,
      linked_container_name: z.string(),
      container_port: z.int(),
      bound_fqdns: z.array(z.string()),
    }),
  ),
  unmatched: z.array(z.string()),
}).meta({ id: "ExternalDeploySession" });

export const syncAnswer = o({
  session_id: uuid,
  results: z.array(
    o({
      application_id: uuid,
      container_name: z.string(),
      status: z.enum(["synced", "noop", "conflict", "drift_recovered"]),
      signature_hash: z.string(),
      synced_fqdns: z.array(z.string()),
      reason: z.string().optional(),
    }),
  ),
  errors: z.array(
    o({ container_name: z.string(), reason: z.string(), application_id: z.string().optional() }),
  ),
}).meta({ id: "ExternalDeploySync" });

export const nothing = z.null().describe("No content");

/** Compound answers, each of one route. */
export const operationList = o({
  run_id: z.string(),
  operations: z.array(operationInList),
  next_cursor: z.string().nullable(),
});
export const registryLoginStarted = o({
  ...running.shape,
  registry_url: z.string(),
  registry_type: z.string(),
});
export const automationKeyCreated = o({
  ...automationKey.shape,
  key: z.string().describe("rca_…, shown once"),
});
export const automationKeyList = o({
  automation_keys: z.array(
    o({
      ...automationKey.shape,
      last_used_at: isoOrNull.describe("its last request, to the minute; null if never used"),
    }),
  ),
});
export const auditPage = o({ events: z.array(auditEvent), next_cursor: z.string().nullable() });
export const applicationList = o({ applications: z.array(application) });
export const applicationPatched = o({
  ...application.shape,
  route: routeChange
    .optional()
    .describe("present when the change gave the route other hostnames: the outcome on its live container"),
});
export const serverList = o({ servers: z.array(server) });
export const providerBinding = o({ server_id: uuid, provider: z.string(), provider_server_id: z.string() });
export const registryCredentialList = z.array(registryCredential);
export const tenant = o({ id: uuid, name: z.string() });
export const deploymentPage = o({ deployments: z.array(deployment), next_cursor: z.string().nullable() });
export const deploymentWithSteps = o({ ...deployment.shape, steps: z.array(step) });
export const enrolled = o({
  server_id: uuid,
  server_name: z.string(),
  agent_credential: z.string(),
  gateway_urls: z.array(z.string()),
});
export const cliLatest = o({
  version: z.string(),
  file: z.string().describe("relayctl-<version>.cjs"),
  sha256: z.string().describe("hex SHA-256 of the file"),
  size: z.int().describe("bytes"),
  url: z.string().describe("where to download the file"),
});
