// Compose-style variable interpolation of a parsed compose value, with the
// step's environment: `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
// `${VAR:?message}`, `${VAR?message}`, `${VAR:+alt}`, `${VAR+alt}` and `$$` for a
// literal dollar. An unset variable without a default becomes "", as in Compose.

export class InterpolationError extends Error {
  override name = "InterpolationError";
}

type Env = Record<string, string | undefined>;

const PATTERN =
  /\$(?:(\$)|([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|(\{[^}]*\}?))/g;

function expand(name: string, op: string | undefined, arg: string, env: Env, where: string): string {
  const value = env[name];
  const unset = value === undefined;
  const empty = unset || value === "";
  switch (op) {
    case ":-":
      return empty ? arg : value!;
    case "-":
      return unset ? arg : value!;
    case ":?":
    case "?":
      if (op === ":?" ? empty : unset) {
        throw new InterpolationError(`${where}: required variable ${name} is missing: ${arg || "unset"}`);
      }
      return value!;
    case ":+":
      return empty ? "" : arg;
    case "+":
      return unset ? "" : arg;
    default:
      return value ?? "";
  }
}

function interpolateString(text: string, env: Env, where: string): string {
  return text.replace(PATTERN, (_m, dollar, bare, braced, op, arg, bad) => {
    if (dollar) return "$";
    if (bare) return env[bare] ?? "";
    if (bad !== undefined) throw new InterpolationError(`${where}: invalid interpolation '$${bad}'`);
    return expand(braced, op, arg ?? "", env, where);
  });
}

/** Interpolates every string in a parsed YAML value (not the keys, as Compose does). */
export function interpolate(value: unknown, env: Env, where: string): unknown {
  if (typeof value === "string") return interpolateString(value, env, where);
  if (Array.isArray(value)) return value.map((v, i) => interpolate(v, env, `${where}[${i}]`));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, interpolate(v, env, `${where}.${k}`)]),
    );
  }
  return value;
}
