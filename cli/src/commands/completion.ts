// completion: a shell completion script made from the command tree itself, so
// it never drifts from the commands. bash and zsh (through bashcompinit). Where a
// command's first argument is an application or a server, the script asks
// `relayctl __complete apps|servers` for their names, with the stored login (or
// RELAYCTL_TOKEN): quietly nothing when offline, not logged in, or slow. Where the
// second is a preview (`previews remove <app> <preview>`), `__complete previews <app>`
// gives that application's preview names.
import type { Command } from "commander";
import { application, ctxOf, isAutomationKey } from "../context.js";
import { usageError } from "../errors.js";

/** What a command's first argument names: `apps`, `servers`, both (`all`), or nothing to look up. */
function namesOf(cmd: Command): string {
  const arg = cmd.registeredArguments[0]?.name() ?? "";
  const app = /\bapp\b/.test(arg);
  const server = /\bserver\b/.test(arg);
  return app && server ? "all" : app ? "apps" : server ? "servers" : "";
}

/** What a command's second argument names: `previews` (of the application before it), or nothing. */
function secondOf(cmd: Command): string {
  return cmd.registeredArguments[1]?.name() === "preview" ? "previews" : "";
}

/** A lookup that takes longer than this is dropped: a completion must not hang the shell. */
const LOOKUP_MS = 2000;

/** "path words" → the subcommands and options completed after them, and the names its argument takes. */
function table(
  cmd: Command,
  path: string[] = [],
  out: Map<string, { words: string[]; names: string; second: string }> = new Map(),
) {
  const visible = cmd.commands.filter((c) => !c.name().startsWith("__"));
  const words = [
    ...visible.map((c) => c.name()),
    ...cmd.options.map((o) => o.long).filter((x): x is string => Boolean(x)),
    "--help",
  ];
  out.set(path.join(" "), { words, names: namesOf(cmd), second: secondOf(cmd) });
  for (const c of visible) table(c, [...path, c.name()], out);
  return out;
}

/** Options that take a value anywhere in the tree: the word after one is its value, not a command. */
function valued(cmd: Command, out: Set<string> = new Set()): Set<string> {
  for (const o of cmd.options) if (o.long && (o.required || o.optional)) out.add(o.long);
  for (const c of cmd.commands) valued(c, out);
  return out;
}

/** The names `relayctl __complete <kind>` prints: one a line, nothing on any failure. */
async function lookUpNames(kind: string, app: string | undefined, cmd: Command): Promise<string[]> {
  const { api } = ctxOf(cmd);
  if (kind === "previews") {
    if (!app) return [];
    const a = await application(api, app);
    const { previews } = await api.call<{ previews: { key: string }[] }>(
      "GET",
      `/api/applications/${a.id}/previews`,
      "dashboard",
    );
    return previews.map((p) => p.key).sort();
  }
  // An rca_ key names only the servers in its scope (the Automation API); it cannot list applications.
  const automation = isAutomationKey(api);
  const get = async (path: string, field: string) =>
    (
      await api.call<Record<string, { name: string }[]>>("GET", path, automation ? "automation" : "dashboard")
    )[field]!.map((x) => x.name);
  const lists = await Promise.all([
    (kind === "apps" || kind === "all") && !automation ? get("/api/applications", "applications") : [],
    kind === "servers" || kind === "all"
      ? get(automation ? "/api/automation/v1/servers" : "/api/servers", "servers")
      : [],
  ]);
  return [...new Set(lists.flat())].filter((n) => /^[A-Za-z0-9._-]+$/.test(n)).sort();
}

export function registerCompletion(program: Command): void {
  program
    .command("__complete <kind> [app]", { hidden: true })
    .description(
      "print application or server names for shell completion (apps, servers, all), or an application's previews (previews <app>)",
    )
    .action(async (kind: string, app: string | undefined, _o: unknown, cmd: Command) => {
      let names: string[] = [];
      try {
        names = await Promise.race([
          lookUpNames(kind, app, cmd),
          new Promise<string[]>((resolve) => setTimeout(() => resolve([]), LOOKUP_MS).unref()),
        ]);
      } catch {
        // offline, not logged in, not allowed: complete nothing
      }
      if (names.length) process.stdout.write(`${names.join("\n")}\n`);
      // Do not wait for a slow request to end.
      process.exit(0);
    });

  program
    .command("completion <shell>")
    .description("print a completion script for bash or zsh")
    .addHelpText(
      "after",
      '\nExamples:\n  source <(relayctl completion bash)\n  relayctl completion zsh > "${fpath[1]}/_relayctl"',
    )
    .action((shell: string) => {
      if (shell !== "bash" && shell !== "zsh") throw usageError("completion: the shell is bash or zsh");
      const cases = [...table(program)]
        .map(
          ([path, t]) =>
            `      "${path}") words="${t.words.join(" ")}"${t.names ? ` names=${t.names}` : ""}${t.second ? ` second=${t.second}` : ""} ;;`,
        )
        .join("\n");
      // `cmdpath`, not `path`: in zsh `path` is tied to PATH.
      const script = `# relayctl ${shell} completion
${shell === "zsh" ? "autoload -U +X bashcompinit && bashcompinit\n" : ""}_relayctl() {
  local cur prev cmdpath="" w skip=0 names="" second="" dropped=0 lastarg=""
  cur="\${COMP_WORDS[COMP_CWORD]}"
  prev="\${COMP_WORDS[COMP_CWORD-1]}"
  for w in "\${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    case " ${[...valued(program)].join(" ")} " in *" $w "*) skip=1; continue ;; esac
    case "$w" in -*) ;; *) cmdpath="\${cmdpath:+$cmdpath }$w" ;; esac
  done
  local words=""
  # After an option that takes a value, complete nothing of ours (file names, by -o default).
  case " ${[...valued(program)].join(" ")} " in *" $prev "*) COMPREPLY=(); return ;; esac
  # Arguments (an app's name...) are not part of the command path: drop them from the end.
  while :; do
    case "$cmdpath" in
${cases}
      *" "*) lastarg="\${cmdpath##* }"; cmdpath="\${cmdpath% *}"; dropped=$((dropped + 1)); continue ;;
    esac
    break
  done
  # The command's first argument, an application or a server: their names, from the API.
  if [ "$dropped" = 0 ] && [ -n "$names" ] && [ "\${cur#-}" = "$cur" ]; then
    words="$words $("\${COMP_WORDS[0]}" __complete "$names" 2>/dev/null)"
  fi
  # Its second argument, a preview of the application given first: that application's previews.
  if [ "$dropped" = 1 ] && [ -n "$second" ] && [ "\${cur#-}" = "$cur" ]; then
    words="$words $("\${COMP_WORDS[0]}" __complete "$second" "$lastarg" 2>/dev/null)"
  fi
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
}
complete -o default -F _relayctl relayctl
`;
      process.stdout.write(script);
    });
}
