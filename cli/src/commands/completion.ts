// completion: a shell completion script made from the command tree itself, so
// it never drifts from the commands. bash and zsh (through bashcompinit).
import type { Command } from "commander";
import { usageError } from "../errors.js";

/** "path words" → the subcommands and options completed after them. */
function table(cmd: Command, path: string[] = [], out: Map<string, string[]> = new Map()) {
  const words = [
    ...cmd.commands.map((c) => c.name()),
    ...cmd.options.map((o) => o.long).filter((x): x is string => Boolean(x)),
    "--help",
  ];
  out.set(path.join(" "), words);
  for (const c of cmd.commands) table(c, [...path, c.name()], out);
  return out;
}

/** Options that take a value anywhere in the tree: the word after one is its value, not a command. */
function valued(cmd: Command, out: Set<string> = new Set()): Set<string> {
  for (const o of cmd.options) if (o.long && (o.required || o.optional)) out.add(o.long);
  for (const c of cmd.commands) valued(c, out);
  return out;
}

export function registerCompletion(program: Command): void {
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
        .map(([path, words]) => `      "${path}") words="${words.join(" ")}" ;;`)
        .join("\n");
      // `cmdpath`, not `path`: in zsh `path` is tied to PATH.
      const script = `# relayctl ${shell} completion
${shell === "zsh" ? "autoload -U +X bashcompinit && bashcompinit\n" : ""}_relayctl() {
  local cur prev cmdpath="" w skip=0
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
      *" "*) cmdpath="\${cmdpath% *}"; continue ;;
    esac
    break
  done
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
}
complete -o default -F _relayctl relayctl
`;
      process.stdout.write(script);
    });
}
