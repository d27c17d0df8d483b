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
        .map(([path, words]) => `    "${path}") words="${words.join(" ")}" ;;`)
        .join("\n");
      const script = `# relayctl ${shell} completion
${shell === "zsh" ? "autoload -U +X bashcompinit && bashcompinit\n" : ""}_relayctl() {
  local cur path="" w
  cur="\${COMP_WORDS[COMP_CWORD]}"
  for w in "\${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
    case "$w" in -*) ;; *) path="\${path:+$path }$w" ;; esac
  done
  local words=""
  case "$path" in
${cases}
  esac
  COMPREPLY=( $(compgen -W "$words" -- "$cur") )
}
complete -F _relayctl relayctl
`;
      process.stdout.write(script);
    });
}
