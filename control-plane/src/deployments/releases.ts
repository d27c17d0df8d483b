// Releases (issue 29). Every deployment that switched traffic is a release:
// its deployments row (migration 017) records the image by id, the
// configuration it ran with and a keyed hash of it, the route and the commit,
// and who triggered it (the row's actor). The newest release on the
// application's server is the live one. Retention keeps the images of the
// application's last `keep_releases` releases on the server: each job lists
// them (DeployJob.keep_images) and the agent's retire removes the
// application's other built images after the switch, so a failed deployment
// never costs a release its image. A rollback is a deployment that starts a
// kept release's image with that release's configuration and builds nothing.
import { createHmac } from "node:crypto";
import type { DeployJob } from "@relayctl/proto";
import type { Knex } from "knex";
import { RcError } from "../errors.js";
import { open, seal } from "../registry/crypto.js";
import type { DeploymentRow } from "./store.js";

/** applications.keep_releases: its default and bounds (the API's schema uses them). */
export const KEEP_RELEASES = { default: 5, min: 1, max: 50 } as const;

/** What a release ran with, besides its env (sealed apart): stored as JSON in deployments.config. */
export interface ReleaseConfig {
  container_port: number;
  health_check_path: string;
  health_check_timeout_seconds: number;
  /** The route's hostnames at the deployment. */
  fqdns: string[];
  /** Names of the request's env overrides: their values are never stored, so a rollback runs without them. */
  env_override_names: string[];
}

/** The columns a deployment's row gets with its job (store.ts insertDeployment). */
export interface ReleaseRecord {
  config: string;
  env_sealed: string | null;
  config_hash: string;
}

type JobConfig = Pick<
  DeployJob,
  "containerPort" | "healthCheckPath" | "healthCheckTimeoutSeconds" | "fqdns" | "env"
>;

/**
 * The record of a deployment's configuration. `storedEnv` is the application's
 * env (sealed into the row, for a rollback); `job.env` is what the container
 * gets (overrides applied), which the hash covers. The hash is an HMAC under a
 * key derived from RELAYCTL_MASTER_KEY, so it names a configuration without
 * letting anyone test guesses of its values; with no master key there is no
 * stored env, and the hash covers the overrides' names but not their values.
 */
export function releaseRecord(
  masterKey: Buffer | undefined,
  job: JobConfig,
  storedEnv: Record<string, string>,
  overrideNames: string[],
): ReleaseRecord {
  const config: ReleaseConfig = {
    container_port: job.containerPort,
    health_check_path: job.healthCheckPath,
    health_check_timeout_seconds: job.healthCheckTimeoutSeconds,
    fqdns: [...job.fqdns],
    env_override_names: [...overrideNames].sort(),
  };
  const env = Object.keys(job.env)
    .sort()
    .map((name) => [name, masterKey ? job.env[name]! : ""]);
  const hashed = JSON.stringify({
    env,
    container_port: config.container_port,
    health_check_path: config.health_check_path,
    health_check_timeout_seconds: config.health_check_timeout_seconds,
  });
  const key = masterKey
    ? createHmac("sha256", masterKey).update("relayctl release config hash v1").digest()
    : Buffer.from("relayctl release config hash v1 (no master key: names only)");
  const hasEnv = Object.keys(storedEnv).length > 0;
  return {
    config: JSON.stringify(config),
    // Stored env needs the master key to exist at all (applications/env.ts).
    env_sealed: hasEnv && masterKey ? seal(masterKey, JSON.stringify(storedEnv)) : null,
    config_hash: createHmac("sha256", key).update(hashed).digest("hex"),
  };
}

export type ReleaseRow = DeploymentRow & {
  image_id: string | null;
  config: string | null;
  env_sealed: string | null;
  config_hash: string | null;
  rollback_of: string | null;
  released_at: number;
};

/** The application's releases on its server, newest first (a completed deployment switched traffic). */
export function releasesQuery(db: Knex, app: { id: string; server_id: string }) {
  return db("deployments as d")
    .join("operations as o", "o.id", "d.operation_id")
    .where({ "d.application_id": app.id, "d.server_id": app.server_id, "o.status": "completed" })
    .whereNotNull("d.container_name")
    .orderBy("d.seq", "desc")
    .select<ReleaseRow[]>("d.*", "o.completed_at as released_at");
}

/** What the server keeps of a release: its image id, else (a release from before ids) its reference. */
export const releaseImage = (r: Pick<ReleaseRow, "image_id" | "image">): string =>
  r.image_id ?? r.image ?? "";

/**
 * The images of the application's newest `keep - 1` releases, for a new
 * deployment's keep_images: with the new deployment's own image, `keep` in all.
 */
export async function keepImagesFor(
  db: Knex,
  app: { id: string; server_id: string; keep_releases?: number | null },
): Promise<string[]> {
  const keep = Number(app.keep_releases ?? KEEP_RELEASES.default);
  if (keep <= 1) return [];
  const rows = await releasesQuery(db, app).limit(keep - 1);
  return [...new Set(rows.map(releaseImage).filter(Boolean))];
}

export interface RollbackTarget {
  release: ReleaseRow;
  config: ReleaseConfig | undefined;
}

/**
 * The release a rollback starts: `releaseId` (a deployment id), or the release
 * before the live one. Refused when it is not a release of the application
 * (404), when there is none before the live one, or when retention removed its
 * image: only the images of the newest `keep_releases` releases are on the
 * server (409, naming the release).
 */
export async function rollbackTarget(
  db: Knex,
  app: { id: string; name: string; server_id: string; keep_releases?: number | null },
  releaseId: string | undefined,
): Promise<RollbackTarget> {
  const keep = Number(app.keep_releases ?? KEEP_RELEASES.default);
  const all = await releasesQuery(db, app);
  let release: ReleaseRow | undefined;
  if (releaseId === undefined) {
    release = all[1];
    if (!release) {
      const detail =
        all.length === 0
          ? `application '${app.name}' has no release yet: deploy it first`
          : `application '${app.name}' has only its live release (${all[0]!.id}): there is nothing before it to roll back to`;
      throw new RcError("RC_ERR_NO_PREVIOUS_RELEASE", detail);
    }
  } else {
    release = all.find((r) => r.id === releaseId.toLowerCase());
    if (!release)
      throw new RcError(
        "RC_ERR_RELEASE_NOT_FOUND",
        `release '${releaseId}' not found: a release is a deployment of application '${app.name}' that completed on its server`,
      );
  }
  const kept = new Set(all.slice(0, keep).map(releaseImage));
  if (!releaseImage(release) || !kept.has(releaseImage(release))) {
    throw new RcError(
      "RC_ERR_RELEASE_IMAGE_GONE",
      `the image of release ${release.id} is no longer on the server: the application keeps the images of its last ${keep} releases (keep_releases); deploy commit ${release.commit_sha ?? release.commit_ref} again instead`,
      { extra: { release: release.id } },
    );
  }
  return { release, config: release.config ? (JSON.parse(release.config) as ReleaseConfig) : undefined };
}

/** The stored env a release ran with, opened; {} when it had none. */
export function releaseEnv(masterKey: Buffer | undefined, release: ReleaseRow): Record<string, string> {
  if (release.env_sealed === null) return {};
  if (!masterKey)
    throw new RcError(
      "RC_ERR_CREDENTIAL_UNREADABLE",
      "the release's env is sealed and RELAYCTL_MASTER_KEY is not set on this control plane",
    );
  try {
    return JSON.parse(open(masterKey, release.env_sealed)) as Record<string, string>;
  } catch (err) {
    throw new RcError(
      "RC_ERR_CREDENTIAL_UNREADABLE",
      `the env of release ${release.id} does not decrypt with the current RELAYCTL_MASTER_KEY`,
      { cause: err },
    );
  }
}

/** A release as callers see it (the application's live_release, the releases list). */
export function presentRelease(r: ReleaseRow, urls: string[], live: boolean, kept: boolean) {
  return {
    deployment_id: r.id,
    live,
    image: r.image,
    image_id: r.image_id,
    image_kept: kept,
    config_hash: r.config_hash,
    commit_sha: r.commit_sha,
    commit_message: r.commit_message,
    rollback_of: r.rollback_of,
    triggered_by: { type: r.actor_type, id: r.actor_id, name: r.actor_name },
    since: new Date(Number(r.released_at)).toISOString(),
    urls,
    fqdns: r.config ? (JSON.parse(r.config) as ReleaseConfig).fqdns : [],
  };
}

/** The live release of each application (the newest on its current server); absent: none yet. */
export async function liveReleasesOf(
  db: Knex,
  apps: { id: string; server_id: string }[],
): Promise<Map<string, ReleaseRow>> {
  if (apps.length === 0) return new Map();
  const newest = db("deployments as d")
    .join("operations as o", "o.id", "d.operation_id")
    .join("applications as a", function () {
      this.on("a.id", "=", "d.application_id").andOn("a.server_id", "=", "d.server_id");
    })
    .whereIn(
      "d.application_id",
      apps.map((a) => a.id),
    )
    .where("o.status", "completed")
    .whereNotNull("d.container_name")
    .groupBy("d.application_id")
    .max({ seq: "d.seq" });
  const rows = await db("deployments as d")
    .join("operations as o", "o.id", "d.operation_id")
    .whereIn("d.seq", newest)
    .select<ReleaseRow[]>("d.*", "o.completed_at as released_at");
  return new Map(rows.map((r) => [r.application_id, r]));
}

/** The releases of the application as callers see them, newest first, with whether each image is kept. */
export async function listReleases(
  db: Knex,
  app: { id: string; server_id: string; keep_releases?: number | null },
  urls: string[],
  limit = 50,
) {
  const keep = Number(app.keep_releases ?? KEEP_RELEASES.default);
  const rows = await releasesQuery(db, app).limit(Math.max(limit, keep));
  const kept = new Set(rows.slice(0, keep).map(releaseImage));
  return rows
    .slice(0, limit)
    .map((r, i) => presentRelease(r, i === 0 ? urls : [], i === 0, kept.has(releaseImage(r))));
}
