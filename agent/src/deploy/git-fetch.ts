// The fetch step: the application's repository into a cache (a bare repository
// per application in <stateDir>/deploy/<application id>/), fetched by URL each
// time so no remote, and no credential, is ever stored in its config; the ref
// resolved and described in one `git log` per candidate (refs.ts); and that
// commit exported into a temp dir that is the build context (removed by the
// caller) by one `read-tree -u`. A redeploy runs three git processes (fetch,
// log, read-tree), as a plain script would; the first also runs `init`.
// Credentials reach git only through GIT_ASKPASS reading the git child's own
// environment; credential helpers are switched off and prompts fail.
import { lookup } from "node:dns/promises";
import { access, chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CommitInfo, GitSource } from "@relayctl/proto";
import { validApplicationId } from "@relayctl/reverse-proxy-sync";
import {
  type GitSourceTarget,
  gitSourceTarget,
  localAddress,
  localHostReason,
} from "@relayctl/reverse-proxy-sync/git-source";
import { runCli } from "../engine/cli-process.js";
import { type DeployContext, StepError, callOptions, check, outputOf } from "./context.js";
import { refCandidates, validRef } from "./refs.js";

/** No secret inside: it prints what the git child's environment holds. */
const ASKPASS = `#!/bin/sh
case "$1" in
  Username*|username*) printf '%s\\n' "$RELAYCTL_GIT_USERNAME" ;;
  *) printf '%s\\n' "$RELAYCTL_GIT_PASSWORD" ;;
esac
`;

export interface FetchedSource {
  commit: CommitInfo;
  /** Temp dir holding the export (`<dir>/src`); the caller removes it. */
  dir: string;
  root: string;
}

class Git {
  constructor(
    readonly ctx: DeployContext,
    readonly gitDir: string,
    readonly env: Record<string, string>,
  ) {}

  async run(args: string[], what: string, extraEnv: Record<string, string> = {}) {
    const o = await runCli({
      binary: "git",
      args: ["--git-dir", this.gitDir, "-c", "credential.helper=", "-c", "protocol.ext.allow=never", ...args],
      env: { ...this.env, ...extraEnv },
      ...callOptions(this.ctx),
    });
    this.ctx.rec.log("fetch", outputOf(o));
    return check(o, what);
  }

  async tryRun(args: string[]) {
    const o = await runCli({
      binary: "git",
      args: ["--git-dir", this.gitDir, ...args],
      env: this.env,
      ...callOptions(this.ctx),
    });
    return o.status === "completed" && o.exitCode === 0 ? o.stdout.trim() : undefined;
  }
}

/** `onCommit`: told the commit as soon as it is resolved, before its export (work that can overlap it). */
export async function fetchSource(
  ctx: DeployContext,
  source: GitSource,
  work: string,
  onCommit?: (sha: string) => void,
): Promise<FetchedSource> {
  const appId = ctx.job.applicationId;
  if (!validApplicationId(appId)) throw new StepError("invalid application id");
  if (!validRef(source.ref)) throw new StepError(`invalid ref '${source.ref.slice(0, 100)}'`);
  if (source.repository === "" || source.repository.startsWith("-")) {
    throw new StepError("invalid repository");
  }
  const reach = source.allowLocalSources
    ? { config: [], repository: source.repository }
    : await checkedReach(source.repository);
  const gitDir = join(ctx.settings.stateDir, "deploy", appId);
  const askpass = join(work, "askpass.sh");
  await writeFile(askpass, ASKPASS, { mode: 0o700 });
  await chmod(askpass, 0o700);
  const git = new Git(ctx, gitDir, {
    GIT_TERMINAL_PROMPT: "0",
    GIT_ASKPASS: askpass,
    GIT_SSH_COMMAND: reach.sshCommand ?? SSH_COMMAND,
    RELAYCTL_GIT_USERNAME: source.credential?.username ?? "",
    RELAYCTL_GIT_PASSWORD: source.credential?.password ?? "",
  });
  // An existing cache repository needs no init (git's own test of one: its HEAD).
  if (
    !(await access(join(gitDir, "HEAD")).then(
      () => true,
      () => false,
    ))
  ) {
    await mkdir(gitDir, { recursive: true, mode: 0o700 });
    await git.run(["init", "-q", "--bare"], "git init");
  }
  ctx.rec.log("fetch", `fetching ${source.repository}`);
  // A pull or merge request's head (a preview, a fork's included) is published by
  // the base repository under its own ref, which the branch and tag fetch skips;
  // fetched every time, as it moves with each push to the request.
  const pullRef = PULL_REF.test(source.ref) ? [`+${source.ref}:${source.ref}`] : [];
  const refspecs = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*", ...pullRef];
  const fetch = [...reach.config, "fetch", "--no-tags"];
  await git.run([...fetch, "--prune", "--", reach.repository, ...refspecs], "git fetch");
  let commit = await resolve(git, source.ref);
  if (commit === undefined && /^[0-9a-f]{40}$/i.test(source.ref)) {
    // A commit no branch or tag reaches: servers that allow it hand it out by SHA.
    await git.run([...fetch, "--", reach.repository, source.ref], "git fetch of the commit");
    commit = await resolve(git, source.ref);
  }
  if (commit === undefined)
    throw new StepError(`ref '${source.ref}' is no branch, tag or commit of the repository`);
  onCommit?.(commit.sha);
  const root = join(work, "src");
  await mkdir(root);
  // A fresh index in the temp dir: --reset reads the commit's tree into it and
  // -u writes its files (modes and symlinks as checkout-index would) into root.
  const index = { GIT_INDEX_FILE: join(work, "index") };
  await git.run(["--work-tree", root, "read-tree", "--reset", "-u", commit.sha], "git read-tree", index);
  return { commit, dir: work, root };
}

/** git's ssh: no prompt (a passphrase or an unknown host key fails the fetch instead). */
const SSH_COMMAND = "ssh -o BatchMode=yes";

/** How git reaches a repository the operator did not allow to be local: checked, and pinned. */
export interface Reach {
  /** `-c` options for the fetch. */
  config: string[];
  /** The URL git fetches (git://: the host replaced by the address checked). */
  repository: string;
  /** ssh to a name: GIT_SSH_COMMAND pinned to the address checked (pinnedSsh). */
  sshCommand?: string;
}

/** A word the shell that runs GIT_SSH_COMMAND reads back as exactly `s`. */
const shellWord = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

/**
 * `base` (an ssh command line) connecting to `address` whatever `host` resolves to by then, while
 * everything else still goes by the name: the user's ssh config for that host (ssh matches it on
 * the name git passes), and the host key check, against the known_hosts entry of the name
 * (`host`, or `[host]:port` off port 22, as ssh itself writes it). So a name whose answer changed
 * after the check reaches the address checked, or nothing: a host key of the name is needed there.
 */
export function pinnedSsh(base: string, host: string, port: number, address: string): string {
  const alias = port === 22 ? host : `[${host}]:${port}`;
  return `${base} -o ${shellWord(`HostName=${address}`)} -o ${shellWord(`HostKeyAlias=${alias}`)}`;
}

/**
 * Refuses a local path or file:// and a host that resolves to a loopback,
 * link-local or private address (issue 30, finding 12). The control plane
 * refused such a source when it was stored, but a name's answer can change
 * between then and now (DNS rebinding), so the agent asks DNS itself and points
 * git at the address it checked: curl's resolve list for http(s), the address in
 * the URL for git://, ssh's HostName for ssh (pinnedSsh: the host key is still
 * checked against the name's). Redirects are not followed: one could lead elsewhere.
 * `resolve`: the resolver (tests give one that answers names no DNS here has).
 */
export async function checkedReach(
  repository: string,
  resolve: (host: string) => Promise<{ address: string; family: number }[]> = (host) =>
    lookup(host, { all: true, verbatim: true }),
): Promise<Reach> {
  const allow = "the operator allows them with RELAYCTL_ALLOW_LOCAL_GIT_SOURCES";
  let target: GitSourceTarget;
  try {
    target = gitSourceTarget(repository);
  } catch {
    throw new StepError("invalid repository URL");
  }
  if (target.kind === "local") throw new StepError(`local paths and file:// are refused (${allow})`);
  const named = localHostReason(target.host);
  if (named) throw new StepError(`${named}: refused (${allow})`);
  let addresses: { address: string; family: number }[];
  try {
    addresses = await resolve(target.host);
  } catch (err) {
    throw new StepError(`cannot resolve ${target.host}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  const local = addresses.find((a) => localAddress(a.address));
  if (local)
    throw new StepError(
      `${target.host} resolves to ${local.address}, a loopback, link-local or private address: refused (${allow})`,
    );
  const first = addresses[0];
  if (!first) throw new StepError(`cannot resolve ${target.host}`);
  const config = ["-c", "protocol.file.allow=never", "-c", "http.followRedirects=false"];
  if (target.scheme === "http" || target.scheme === "https") {
    const address = first.family === 6 ? `[${first.address}]` : first.address;
    return {
      config: [...config, "-c", `http.curloptResolve=${target.host}:${target.port}:${address}`],
      repository,
    };
  }
  if (target.scheme === "git" && isIP(target.host) === 0) {
    const url = new URL(repository);
    url.hostname = first.family === 6 ? `[${first.address}]` : first.address;
    return { config, repository: url.href };
  }
  if (target.scheme === "ssh" && isIP(target.host) === 0)
    return {
      config,
      repository,
      sshCommand: pinnedSsh(SSH_COMMAND, target.host, target.port, first.address),
    };
  return { config, repository };
}

const PULL_REF = /^refs\/(pull|merge-requests)\/\d+\/head$/;

/** The first candidate naming a commit, described by the same `git log` that resolves it. */
async function resolve(git: Git, ref: string): Promise<CommitInfo | undefined> {
  for (const c of refCandidates(ref)) {
    const out = await git.tryRun([
      "log",
      "-1",
      "--no-walk",
      "--format=%H%x00%s%x00%an <%ae>",
      "--end-of-options",
      `${c.rev}^{commit}`,
      "--",
    ]);
    const [sha = "", message = "", author = ""] = (out ?? "").split("\0");
    if (/^[0-9a-f]{40,64}$/.test(sha)) {
      git.ctx.rec.log("fetch", `${ref} is a ${c.kind}: ${sha}`);
      return { sha, message, author };
    }
  }
  return undefined;
}

/** A temp dir for one deployment's export and askpass helper. */
export function workDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), "relayctl-deploy-"));
}

export function removeWorkDir(dir: string): Promise<void> {
  return rm(dir, { recursive: true, force: true });
}
