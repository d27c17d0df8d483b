// make dev's terminal: every process's log lines, JSON (pino) or not, printed readably through
// devkit's formatter (control characters escaped, fields capped), each prefixed with its name.
import { logFormatter } from "@relayctl/devkit";

/** printer(name, color) → a function printing one output line of `name`, every physical line prefixed. */
export function makePrinter(paint, colorize) {
  const format = logFormatter({ colorize });
  return (name, color) => {
    const prefix = paint(color, `[${name}]`);
    return (text) => process.stdout.write(`${prefix} ${format(text).replaceAll("\n", `\n${prefix} `)}\n`);
  };
}

/** A pino destination: the control plane's JSON lines, printed readably. */
export function prettyDestination(print) {
  let buffered = "";
  return {
    write(chunk) {
      buffered += chunk;
      let nl = buffered.indexOf("\n");
      while (nl >= 0) {
        print(buffered.slice(0, nl));
        buffered = buffered.slice(nl + 1);
        nl = buffered.indexOf("\n");
      }
    },
  };
}
