// Applications to deploy in the deployment tests: a git repository whose
// commits each serve "version <v>" with busybox httpd (and a CGI script that
// prints the env test's variables), built FROM the harness's busybox image so a
// build is one COPY, no pull from anywhere.
import { execFile } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { makeTempDir } from "./cleanup";
import { podman } from "./containers";

const run = promisify(execFile);

export const BASE_IMAGE = "localhost/relayctl-test-busybox:1";

export async function git(cwd: string, ...args: string[]): Promise<string> {
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: "Dev One",
    GIT_AUTHOR_EMAIL: "dev@example.test",
    GIT_COMMITTER_NAME: "Dev One",
    GIT_COMMITTER_EMAIL: "dev@example.test",
  };
  return (await run("git", args, { cwd, env })).stdout.trim();
}

/** The harness's busybox base image (same recipe as harness/containers.ts), built once per machine. */
export async function baseImage(): Promise<void> {
  if (
    await podman(["image", "exists", BASE_IMAGE]).then(
      () => true,
      () => false,
    )
  )
    return;
  const ctx = makeTempDir("base");
  copyFileSync("/bin/busybox", join(ctx, "busybox"));
  writeFileSync(
    join(ctx, "Containerfile"),
    'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n',
  );
  await podman(["build", "-q", "-t", BASE_IMAGE, ctx]);
}

export interface Repo {
  dir: string;
  /** Commits `version` as the served page (cmd: the container's command) and returns its SHA. */
  commit(version: string, cmd?: string[]): Promise<string>;
}

export async function makeRepo(): Promise<Repo> {
  const dir = makeTempDir("repo");
  await git(dir, "init", "-q", "-b", "main");
  mkdirSync(join(dir, "www", "cgi-bin"), { recursive: true });
  // Prints the variable the env test sets, so its value is seen coming out of the container.
  writeFileSync(
    join(dir, "www", "cgi-bin", "env"),
    '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\nprintf "APP_SECRET=%s PATH=%s" "$APP_SECRET" "$PATH"\n',
  );
  chmodSync(join(dir, "www", "cgi-bin", "env"), 0o755);
  return {
    dir,
    commit: async (version, cmd = ["httpd", "-f", "-p", "8080", "-h", "/www"]) => {
      writeFileSync(join(dir, "www", "index.html"), `version ${version}`);
      writeFileSync(
        join(dir, "Dockerfile"),
        `FROM ${BASE_IMAGE}\nCOPY www /www\nCMD ${JSON.stringify(cmd)}\n`,
      );
      await git(dir, "add", "-A");
      await git(dir, "commit", "-q", "-m", `release ${version}`);
      return git(dir, "rev-parse", "HEAD");
    },
  };
}
