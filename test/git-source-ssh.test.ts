// A git source over ssh is pinned to the address the agent checked (issue 30, finding 12, the
// ssh part): a name whose answer changes between the check and git's connection (DNS rebinding)
// still reaches the checked address, and the host key is still checked against the name's. Real
// sshd on a loopback port, real git and ssh; the name (git.pin.test) resolves nowhere, so only
// the pin can bring ssh to it.
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "@relayctl/devkit";
import test from "ava";
import { checkedReach, pinnedSsh } from "../agent/src/deploy/git-fetch";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { ManagedProcess } from "./harness/process";

const NAME = "git.pin.test";
const dir = makeTempDir("git-ssh");
test.after.always(cleanupAll);

/** An sshd on 127.0.0.1:port that lets the test's key in as root (git-upload-pack runs as root). */
async function startSshd(): Promise<{ port: number; hostKey: string; clientKey: string }> {
  const hostKey = join(dir, "host_ed25519");
  const clientKey = join(dir, "client_ed25519");
  for (const key of [hostKey, clientKey])
    execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key]);
  writeFileSync(join(dir, "authorized_keys"), readFileSync(`${clientKey}.pub`), { mode: 0o600 });
  // sshd refuses to start without its privilege separation directory.
  if (!existsSync("/run/sshd")) mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const port = await freePort();
  const config = join(dir, "sshd_config");
  writeFileSync(
    config,
    [
      "ListenAddress 127.0.0.1",
      `HostKey ${hostKey}`,
      `PidFile ${join(dir, "sshd.pid")}`,
      `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
      "StrictModes no",
      "UsePAM no",
      "PermitRootLogin prohibit-password",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "UseDNS no",
      "",
    ].join("\n"),
  );
  const sshd = new ManagedProcess({
    name: "sshd",
    command: "/usr/sbin/sshd",
    args: ["-D", "-e", "-f", config, "-p", String(port)],
    logFile: join(dir, "sshd.log"),
  });
  await sshd.waitForLine((l) => l.text.includes("Server listening on"), {
    what: "sshd listening",
    timeoutMs: 15_000,
  });
  return { port, hostKey, clientKey };
}

let sshd: { port: number; hostKey: string; clientKey: string };
let repo: string;
let head: string;

test.before(async () => {
  sshd = await startSshd();
  repo = join(dir, "app.git");
  const work = join(dir, "work");
  mkdirSync(work);
  const git = (args: string[], cwd = work) => execFileSync("git", args, { cwd, encoding: "utf8" }).trim();
  git(["init", "-q", "-b", "main"]);
  writeFileSync(join(work, "README"), "pinned\n");
  git(["add", "README"]);
  git(["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first"]);
  head = git(["rev-parse", "HEAD"]);
  git(["clone", "-q", "--bare", work, repo], dir);
});

/** `git ls-remote` of the repository by NAME over ssh, with GIT_SSH_COMMAND `sshCommand`. */
async function lsRemote(sshCommand: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const args = ["ls-remote", `ssh://root@${NAME}:${sshd.port}${repo}`, "refs/heads/main"];
  const env = { ...process.env, GIT_SSH_COMMAND: sshCommand, GIT_TERMINAL_PROMPT: "0" };
  try {
    const { stdout, stderr } = await promisify(execFile)("git", args, { env, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

/** The test's client settings (its key, a known_hosts file of its own), then BatchMode as the agent's. */
function clientSsh(knownHosts: string): string {
  return [
    "ssh -F /dev/null -o IdentitiesOnly=yes",
    `-i ${sshd.clientKey} -o UserKnownHostsFile=${knownHosts} -o StrictHostKeyChecking=yes`,
    "-o BatchMode=yes",
  ].join(" ");
}

const hostKeyLine = (name: string) => `${name} ${readFileSync(`${sshd.hostKey}.pub`, "utf8").trim()}\n`;

test("ssh pin - the pinned command reaches the checked address by a name that resolves nowhere", async (t) => {
  const knownHosts = join(dir, "known_hosts_name");
  writeFileSync(knownHosts, hostKeyLine(`[${NAME}]:${sshd.port}`));
  const unpinned = await lsRemote(clientSsh(knownHosts));
  t.not(unpinned.code, 0, "without the pin, ssh resolves the name itself (and finds nothing)");
  t.regex(unpinned.stderr, /Could not resolve hostname/i, unpinned.stderr);

  const pinned = await lsRemote(pinnedSsh(clientSsh(knownHosts), NAME, sshd.port, "127.0.0.1"));
  t.is(pinned.code, 0, pinned.stderr);
  t.is(pinned.stdout, `${head}\trefs/heads/main\n`);
});

test("ssh pin - the host key is still checked against the name's entry, not the address's", async (t) => {
  // A known_hosts that trusts the address only: the pin must not turn that into trust of the name.
  const knownHosts = join(dir, "known_hosts_address");
  writeFileSync(knownHosts, hostKeyLine(`[127.0.0.1]:${sshd.port}`));
  const res = await lsRemote(pinnedSsh(clientSsh(knownHosts), NAME, sshd.port, "127.0.0.1"));
  t.not(res.code, 0, res.stdout);
  t.regex(res.stderr, /Host key verification failed/, res.stderr);
});

test("ssh pin - the agent's check pins ssh and scp-like sources to the address it resolved", async (t) => {
  const resolve = async (host: string) => {
    if (host === NAME) return [{ address: "203.0.113.7", family: 4 }];
    if (host === "v6.pin.test") return [{ address: "2001:db8::7", family: 6 }];
    // An address resolves to itself, as getaddrinfo answers it.
    if (isIP(host) !== 0) return [{ address: host, family: isIP(host) }];
    return [{ address: "127.0.0.1", family: 4 }];
  };
  const base = "ssh -o BatchMode=yes";
  const ssh = await checkedReach(`ssh://git@${NAME}:2222/org/app.git`, resolve);
  t.is(ssh.sshCommand, `${base} -o 'HostName=203.0.113.7' -o 'HostKeyAlias=[${NAME}]:2222'`);
  t.is(
    ssh.repository,
    `ssh://git@${NAME}:2222/org/app.git`,
    "git still names the host: ssh's config for it applies",
  );
  const scp = await checkedReach(`git@${NAME}:org/app.git`, resolve);
  t.is(scp.sshCommand, `${base} -o 'HostName=203.0.113.7' -o 'HostKeyAlias=${NAME}'`);
  const v6 = await checkedReach("ssh://git@v6.pin.test/org/app.git", resolve);
  t.is(v6.sshCommand, `${base} -o 'HostName=2001:db8::7' -o 'HostKeyAlias=v6.pin.test'`);
  // An address in the URL is the address checked: nothing to pin; http(s) is pinned by curl's list.
  t.is((await checkedReach("ssh://git@203.0.113.9/org/app.git", resolve)).sshCommand, undefined);
  t.is((await checkedReach(`https://${NAME}/org/app.git`, resolve)).sshCommand, undefined);
  // A name that resolves to the loopback is refused before anything is pinned.
  await t.throwsAsync(checkedReach("git@rebound.pin.test:org/app.git", resolve), {
    message: /rebound\.pin\.test resolves to 127\.0\.0\.1, a loopback, link-local or private address/,
  });
  // A quote in an scp-like host cannot break out of the shell word GIT_SSH_COMMAND is read as.
  t.is(
    pinnedSsh(base, "a'b", 22, "203.0.113.7"),
    `${base} -o 'HostName=203.0.113.7' -o 'HostKeyAlias=a'\\''b'`,
  );
});
