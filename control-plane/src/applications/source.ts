// What an application deploys from and how (issue 11): its git source, its build
// (stored as JSON so a `compose` type is a new value, not a migration of rows),
// its health check. Checked here, beyond what the route's schema says, because
// the operator CLI creates applications too; and again on the agent before any
// of it reaches git or the container engine.
import { gitSourceTarget, localHostReason } from "@relayctl/reverse-proxy-sync/git-source";
import { z } from "zod";
import { RcError } from "../errors.js";

export const DEFAULT_BRANCH = "main";
export const DEFAULT_HEALTH_PATH = "/";
export const DEFAULT_HEALTH_TIMEOUT_SECONDS = 30;
export const DEFAULT_DOCKERFILE = "Dockerfile";
export const DEFAULT_CONTEXT = ".";

/** A path inside the repository: relative, no `..` segment, no NUL. */
const repoPath = z
  .string()
  .min(1)
  .max(1024)
  .refine((p) => !p.startsWith("/") && !p.split("/").includes("..") && !p.includes("\0"), {
    error: "must be a relative path inside the repository (no leading '/', no '..')",
  });

export const buildSchema = z.discriminatedUnion("type", [
  z.strictObject({
    type: z.literal("dockerfile"),
    dockerfile: repoPath.optional(),
    context: repoPath.optional(),
  }),
  z.strictObject({
    type: z.literal("image"),
    // An image reference: [registry/]name[:tag][@digest]; no whitespace, no flag.
    image: z
      .string()
      .min(1)
      .max(1024)
      .refine((s) => /^[a-zA-Z0-9][^\s]*$/.test(s), {
        error: "must be an image reference such as registry/name:tag",
      }),
    registry_credential_id: z.uuid().nullable().optional(),
  }),
]);
export type BuildInput = z.infer<typeof buildSchema>;

/** The stored (and shown) build: every default filled in. */
export type Build =
  | { type: "dockerfile"; dockerfile: string; context: string }
  | { type: "image"; image: string; registry_credential_id: string | null };

// git's check-ref-format, the parts a user can get wrong.
export const refSchema = z
  .string()
  .min(1)
  .max(255)
  .refine(
    (r) =>
      /^[A-Za-z0-9._/@+-]+$/.test(r) &&
      !r.startsWith("-") &&
      !r.includes("..") &&
      !r.endsWith("/") &&
      !r.endsWith(".lock"),
    {
      error: "must be a branch, tag or commit SHA",
    },
  );

/** deploy_tags: a glob over tag names (`*`, `?`), e.g. `v*` or `release-*`. */
export const tagPatternSchema = z
  .string()
  .min(1)
  .max(255)
  .refine((p) => /^[A-Za-z0-9._/@+*?-]+$/.test(p), { error: "must be a tag name pattern such as v*" });

/** watch_paths: globs of repository paths (`*`, `**`, `?`), e.g. `services/api/**`. */
export const watchPathsSchema = z.array(repoPath.max(255)).min(1).max(50);

export const healthPathSchema = z
  .string()
  .max(1024)
  .refine((p) => /^\/[^\s]*$/.test(p), { error: "must be an absolute URL path such as /healthz" });

export const gitCredentialSchema = z.strictObject({
  username: z.string().min(1).max(255),
  password: z.string().min(1).max(4096),
});

/**
 * RELAYCTL_ALLOW_LOCAL_GIT_SOURCES, set once at boot (serve.ts) like the audit
 * keys: every path that stores a source or builds a deploy job reads it here.
 */
let localSourcesAllowed = false;

export function allowLocalGitSources(allowed: boolean): void {
  localSourcesAllowed = allowed;
}

export function localGitSourcesAllowed(): boolean {
  return localSourcesAllowed;
}

/**
 * https/http, ssh:// and scp-like (git@host:org/repo.git); file:// or an
 * absolute local path (tests, mirrors on the server), and hosts on the loopback,
 * link-local or private ranges, only when the operator allows local sources
 * (issue 30, finding 12; the agent checks again what the name resolves to when
 * it fetches). Credentials never ride in the URL: they would land in logs and in
 * git's config.
 */
export function checkRepository(url: string, allowLocal = localSourcesAllowed): string {
  const fail = (why: string): never => {
    throw new RcError("RC_ERR_VALIDATION", `git_repository: ${why}`);
  };
  if (url.length > 2048 || /\s/.test(url) || url.startsWith("-")) fail("not a repository URL or path");
  if (/^(https?|ssh|git|file):\/\//i.test(url)) {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return fail(`'${url.slice(0, 200)}' is not a valid URL`);
    }
    if (parsed.password || (parsed.username && /^https?:$/i.test(parsed.protocol)))
      fail("credentials do not belong in the URL: set git_credential instead");
  } else if (!url.startsWith("/") && !/^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/].*$/.test(url)) {
    return fail("use an https://, ssh:// or git@host:path URL, or an absolute path");
  }
  if (!allowLocal) {
    const target = gitSourceTarget(url);
    if (target.kind === "local")
      fail(
        "local paths and file:// are refused (the operator allows them with RELAYCTL_ALLOW_LOCAL_GIT_SOURCES)",
      );
    else {
      const why = localHostReason(target.host);
      if (why) fail(`${why}: refused (the operator allows them with RELAYCTL_ALLOW_LOCAL_GIT_SOURCES)`);
    }
  }
  return url;
}

export function compileBuild(input: BuildInput | null | undefined, hasRepository: boolean): Build | null {
  if (!input) {
    return hasRepository
      ? { type: "dockerfile", dockerfile: DEFAULT_DOCKERFILE, context: DEFAULT_CONTEXT }
      : null;
  }
  if (input.type === "dockerfile") {
    if (!hasRepository)
      throw new RcError("RC_ERR_VALIDATION", "build: a dockerfile build needs git_repository");
    return {
      type: "dockerfile",
      dockerfile: input.dockerfile ?? DEFAULT_DOCKERFILE,
      context: input.context ?? DEFAULT_CONTEXT,
    };
  }
  return { type: "image", image: input.image, registry_credential_id: input.registry_credential_id ?? null };
}

export function parseBuild(stored: string | null): Build | null {
  return stored ? (JSON.parse(stored) as Build) : null;
}
