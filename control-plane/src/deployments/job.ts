// Builds a deployment's DeployJob from the application: the stored env opened
// and the request's overrides applied on top (never stored), the git and
// registry credentials opened. Everything secret here lives only in the job
// that goes onto the agent's stream; the agent scrubs all of it from its logs.
import type { DeployJob } from "@relayctl/proto";
import type { Knex } from "knex";
import type { AppsUrl } from "../applications/app-url.js";
import { routeFqdns } from "../applications/hosts.js";
import type { ApplicationRow } from "../applications/store.js";
import { openEnv } from "../applications/env.js";
import { type Build, localGitSourcesAllowed, parseBuild } from "../applications/source.js";
import { RcError } from "../errors.js";
import { open } from "../registry/crypto.js";
import {
  type ReleaseRecord,
  type RollbackTarget,
  keepImagesFor,
  releaseEnv,
  releaseImage,
  releaseRecord,
} from "./releases.js";
import { openCredential, requireMasterKey } from "../registry/credentials.js";

export type JobWithoutDeadline = Omit<DeployJob, "deadlineUnixMs">;

/** A deployment's job and the release record its row gets (releases.ts). */
export interface PreparedJob {
  job: JobWithoutDeadline;
  record: ReleaseRecord;
  /** The release a rollback starts again. */
  rollbackOf?: string;
}

/** The registry host of an image reference (docker's rule: a first part with '.', ':' or localhost). */
export function imageRegistry(image: string): string {
  const first = image.split("/")[0]!;
  return image.includes("/") && (first.includes(".") || first.includes(":") || first === "localhost")
    ? first
    : "docker.io";
}

export async function buildDeployJob(
  db: Knex,
  masterKey: Buffer | undefined,
  app: ApplicationRow,
  deploymentId: string,
  commitRef: string,
  overrides: Record<string, string>,
  /** A credential minted for this deployment (a GitHub installation token); wins over the stored one. */
  minted?: { username: string; password: string },
  /** RELAYCTL_APPS_URL: the default hostname joins the route's fqdns (hosts.ts). */
  appsUrl?: AppsUrl,
): Promise<PreparedJob> {
  const build = parseBuild(app.build);
  if (!build) throw new RcError("RC_ERR_NOT_DEPLOYABLE");
  const needsKey =
    app.git_password_sealed !== null || (build.type === "image" && build.registry_credential_id);
  const hasEnv = await db("application_env").where({ application_id: app.id }).first("name");
  const key = needsKey || hasEnv ? requireMasterKey(masterKey) : undefined;
  const env = key && hasEnv ? await openEnv(db, key, app.id) : {};
  const job: JobWithoutDeadline = {
    deploymentId,
    applicationId: app.id,
    applicationName: app.name,
    source: app.git_repository
      ? {
          repository: app.git_repository,
          ref: commitRef,
          credential: minted
            ? minted
            : key && app.git_username && app.git_password_sealed
              ? { username: app.git_username, password: openSealed(key, app.git_password_sealed) }
              : undefined,
          allowLocalSources: localGitSourcesAllowed(),
        }
      : undefined,
    build: await buildPart(db, key, app.tenant_id, build),
    containerPort: Number(app.container_port),
    healthCheckPath: app.health_check_path,
    healthCheckTimeoutSeconds: Number(app.health_check_timeout_seconds),
    env: { ...env, ...overrides },
    fqdns: await routeFqdns(db, appsUrl, app),
    containerBaseName: app.linked_container_name,
    keepImages: await keepImagesFor(db, app),
    limits: undefined,
  };
  return { job, record: releaseRecord(masterKey, job, env, Object.keys(overrides)) };
}

/**
 * A rollback's job: the kept image of `target`'s release, started with that
 * release's port, health check and stored env (its request overrides were
 * never stored), on the application's current hostnames and container name.
 * Nothing is fetched or built.
 */
export async function buildRollbackJob(
  db: Knex,
  masterKey: Buffer | undefined,
  app: ApplicationRow,
  target: RollbackTarget,
  deploymentId: string,
  appsUrl?: AppsUrl,
): Promise<PreparedJob> {
  const { release, config } = target;
  const env = releaseEnv(masterKey, release);
  const job: JobWithoutDeadline = {
    deploymentId,
    applicationId: app.id,
    applicationName: app.name,
    source: undefined,
    build: { $case: "release", release: { image: releaseImage(release), deploymentId: release.id } },
    containerPort: config?.container_port ?? Number(app.container_port),
    healthCheckPath: config?.health_check_path ?? app.health_check_path,
    healthCheckTimeoutSeconds:
      config?.health_check_timeout_seconds ?? Number(app.health_check_timeout_seconds),
    env,
    fqdns: await routeFqdns(db, appsUrl, app),
    containerBaseName: app.linked_container_name,
    keepImages: await keepImagesFor(db, app),
    limits: undefined,
  };
  return { job, record: releaseRecord(masterKey, job, env, []), rollbackOf: release.id };
}

function openSealed(key: Buffer, sealed: string): string {
  try {
    return open(key, sealed);
  } catch (err) {
    throw new RcError(
      "RC_ERR_CREDENTIAL_UNREADABLE",
      "a stored secret of this application does not decrypt with the current RELAYCTL_MASTER_KEY: set it again",
      { cause: err },
    );
  }
}

async function buildPart(
  db: Knex,
  key: Buffer | undefined,
  tenantId: string,
  build: Build,
): Promise<JobWithoutDeadline["build"]> {
  if (build.type === "dockerfile") {
    return { $case: "dockerfile", dockerfile: { dockerfile: build.dockerfile, context: build.context } };
  }
  if (!build.registry_credential_id || !key) {
    return { $case: "image", image: { image: build.image, auth: undefined } };
  }
  const c = await openCredential(db, key, tenantId, build.registry_credential_id).catch((err) => {
    // Deleted since the build named it: the application's setting is at fault, not the request.
    if (err instanceof RcError && err.code === "RC_ERR_CREDENTIAL_NOT_FOUND")
      throw new RcError(
        "RC_ERR_NOT_DEPLOYABLE",
        `the build's registry credential '${build.registry_credential_id}' no longer exists: set another`,
        { cause: err },
      );
    throw err;
  });
  return {
    $case: "image",
    image: {
      image: build.image,
      auth: { registry: imageRegistry(build.image), username: c.username, password: c.password },
    },
  };
}
