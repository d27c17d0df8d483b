// The built relayctl CLI's own help, run as a process with no server: --help on every command
// (examples, --json) and the bash/zsh completion scripts, driven through bash's completion
// protocol. Commands against a server: cli-relayctl.test.ts and cli-relayctl-login.test.ts.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { run } from "@relayctl/devkit";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { CliUser } from "./harness/cli";

test.after.always(cleanupAll);

test("cli - the bash completion script completes commands, subcommands and options in bash", async (t) => {
  const r = await new CliUser().run(["completion", "bash"]);
  t.is(r.code, 0);
  const script = join(makeTempDir("completion"), "relayctl.bash");
  writeFileSync(script, r.stdout);
  // bash's completion protocol, as readline drives it: COMP_WORDS and COMP_CWORD in, COMPREPLY out.
  const complete = async (...words: string[]) => {
    const { stdout } = await run(
      "bash",
      [
        "-c",
        'source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _relayctl; printf "%s\\n" "${COMPREPLY[@]}"',
        script,
        "relayctl",
        ...words,
      ],
      { timeoutMs: 10_000 },
    );
    return stdout.split("\n").filter(Boolean).sort();
  };
  t.true((await complete("")).includes("deploy"));
  t.deepEqual(await complete("apps", "env", ""), ["--help", "list", "set", "unset"]);
  t.deepEqual(await complete("o"), ["ops"]);
  // A global option's value is not a command; an application's name is not either.
  t.deepEqual(await complete("--url", "http://x", "ops", ""), ["--help", "get", "list"]);
  t.deepEqual(await complete("deploy", "shop", "--w"), ["--wait"]);
  t.deepEqual(await complete("exec", "--timeout", ""), []);
  const zsh = await new CliUser().run(["completion", "zsh"]);
  t.is(zsh.code, 0);
  t.regex(zsh.stdout, /^autoload -U \+X bashcompinit && bashcompinit$/m);
  t.false(/\blocal\b.*\bpath\b/.test(zsh.stdout), "zsh ties `path` to PATH");
  const bad = await new CliUser().run(["completion", "fish"]);
  t.is(bad.code, 64);
});

/** The commands listed in a --help page (its "Commands:" section), without `help`. */
function subcommands(help: string): string[] {
  const section = /\nCommands:\n([\s\S]*?)(\n\n|$)/.exec(help)?.[1] ?? "";
  return section
    .split("\n")
    .map((l) => /^ {2}([a-z][a-z-]*)/.exec(l)?.[1])
    .filter((n): n is string => n !== undefined && n !== "help");
}

test("cli - --help on every command exits 0 with examples and lists --json", async (t) => {
  const u = new CliUser();
  const seen: string[] = [];
  const walk = async (path: string[]) => {
    const r = await u.run([...path, "--help"]);
    const name = ["relayctl", ...path].join(" ");
    t.is(r.code, 0, name);
    t.regex(r.stdout, /\nExamples?( \([^)]*\))?:\n {2}\S/, `${name}: examples`);
    t.regex(r.stdout, /^ {2}--json +print the answer as JSON/m, `${name}: --json`);
    seen.push(name);
    for (const sub of subcommands(r.stdout)) await walk([...path, sub]);
  };
  await walk([]);
  // The walk reached every command the issue names.
  for (const cmd of [
    "login",
    "logout",
    "whoami",
    "servers list",
    "apps list",
    "apps show",
    "apps create",
    "apps env set",
    "apps env unset",
    "deploy",
    "exec",
    "restart",
    "ops get",
    "ops list",
    "keys create",
    "keys list",
    "keys revoke",
    "audit",
    "registry add",
    "registry list",
    "registry remove",
    "completion",
  ])
    t.true(seen.includes(`relayctl ${cmd}`), cmd);
});
