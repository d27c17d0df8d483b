// A local git repository holding a tiny web application that relayctl deploys in
// the deployment tests. Its Dockerfile builds FROM the busybox base image that
// containers.ts builds (a local image: no pull from the internet), serves
// www/index.html (`version <label>`) with busybox httpd on port 8080 and answers
// /cgi-bin/env?NAME with the value of the container's env var NAME (`<unset>`
// when it has none), so a test sees both which version serves and what
// environment reached the container. A "broken" commit builds fine but its
// container never answers (CMD sleep), which is what a failed health check needs;
// commitCommand gives the container any other command (one that crashes, say).
import { execFile } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { makeTempDir } from "./cleanup";
import { BASE_IMAGE, buildBaseImage } from "./containers";

const run = promisify(execFile);

/** The port the application listens on inside its container. */
export const APP_PORT = 8080;

export const AUTHOR = { name: "Ada Tester", email: "ada@relayctl.test" };

export interface Commit {
  sha: string;
  /** Subject line (the whole message: commits here have no body). */
  message: string;
  /** `version <label>` for a serving commit; the body / answers with it. */
  version: string;
  /** The container does not serve (commitBroken, commitCommand). */
  broken: boolean;
}

export interface AppRepo {
  /** Absolute path of the work tree (git_repository for a local-path source). */
  path: string;
  branch: string;
  author: typeof AUTHOR;
  /** Every commit made, oldest first. */
  commits: Commit[];
  head(): Commit;
  /** Commits a serving version answering `version <label>` on `/`. */
  commitVersion(label: string, message?: string): Promise<Commit>;
  /** Commits a version whose container runs but never answers HTTP. */
  commitBroken(label: string, message?: string): Promise<Commit>;
  /** Commits `version <label>` in www/ with the container running cmd instead of the web server. */
  commitCommand(label: string, cmd: string[], message?: string): Promise<Commit>;
  /** Creates a lightweight tag at sha (default HEAD). */
  tag(name: string, sha?: string): Promise<void>;
  git(args: string[]): Promise<string>;
}

// The CGI script: QUERY_STRING is the variable's name; anything but a plain name is
// refused so the eval cannot run input.
const ENV_CGI = `#!/bin/sh
printf 'Content-Type: text/plain\\r\\n\\r\\n'
name="$QUERY_STRING"
case "$name" in ''|*[!A-Za-z0-9_]*) printf 'bad name'; exit 0;; esac
eval "printf '%s' \\"\\\${$name-<unset>}\\""
`;

const SERVE = ["httpd", "-f", "-p", String(APP_PORT), "-h", "/www"];
const NEVER_ANSWER = ["sleep", "2147483647"];

function writeTree(dir: string, version: string, cmd: string[]): void {
  mkdirSync(join(dir, "www", "cgi-bin"), { recursive: true });
  writeFileSync(join(dir, "www", "index.html"), version);
  writeFileSync(join(dir, "www", "cgi-bin", "env"), ENV_CGI);
  chmodSync(join(dir, "www", "cgi-bin", "env"), 0o755);
  writeFileSync(join(dir, "Dockerfile"), `FROM ${BASE_IMAGE}\nCOPY www /www\nCMD ${JSON.stringify(cmd)}\n`);
}

/** A fresh repository `<tmp>/<name>` on `branch` with one serving commit `version <first>`. */
export async function createAppRepo(
  opts: { name?: string; branch?: string; first?: string } = {},
): Promise<AppRepo> {
  // The base image must exist before anything builds FROM it.
  await buildBaseImage();
  const path = join(makeTempDir("git-app"), opts.name ?? "app");
  mkdirSync(path);
  const branch = opts.branch ?? "main";
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: AUTHOR.name,
    GIT_AUTHOR_EMAIL: AUTHOR.email,
    GIT_COMMITTER_NAME: AUTHOR.name,
    GIT_COMMITTER_EMAIL: AUTHOR.email,
    // The user's and the system's git config must not change what the tests see.
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_CONFIG_NOSYSTEM: "1",
  };
  const git = async (args: string[]) => (await run("git", args, { cwd: path, env })).stdout.trim();
  await git(["init", "-q", "-b", branch]);
  const commits: Commit[] = [];
  const commit = async (label: string, cmd: string[], message?: string) => {
    const version = `version ${label}`;
    const broken = cmd !== SERVE;
    writeTree(path, version, cmd);
    const msg = message ?? (broken ? `Break the app (${label})` : `Release ${label}`);
    await git(["add", "-A"]);
    await git(["commit", "-q", "-m", msg]);
    const c: Commit = { sha: await git(["rev-parse", "HEAD"]), message: msg, version, broken };
    commits.push(c);
    return c;
  };
  await commit(opts.first ?? "1", SERVE);
  return {
    path,
    branch,
    author: AUTHOR,
    commits,
    head: () => commits[commits.length - 1]!,
    commitVersion: (label, message) => commit(label, SERVE, message),
    commitBroken: (label, message) => commit(label, NEVER_ANSWER, message),
    commitCommand: (label, cmd, message) => commit(label, cmd, message),
    tag: async (name, sha) => {
      await git(["tag", name, sha ?? "HEAD"]);
    },
    git,
  };
}
