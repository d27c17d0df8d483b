// apps: list, show, create, and env set/unset. `env set` takes NAME=value pairs,
// several at once, like `fly secrets set`; a NAME alone reads its value from
// stdin or a file, for secrets that must stay off argv (visible to every user of
// the machine, and in shell history). Values are never echoed back (the API
// cannot read them back either).
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { application, chompOne, collect, ctxOf, readStdin, serverId, tenantId } from "../context.js";
import { usageError } from "../errors.js";
import { emit, printFields, printTable } from "../output.js";

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

interface ContainerState {
  name: string;
  state: string;
  exit_code: number | null;
  restart_count: number;
  last_crash_at: string | null;
  since: string | null;
  /** Absent from control planes before it. */
  held_until?: string | null;
}

/** "crashed (exit 1) since …, 4 restarts, last crash …[, held by the agent until …]" — the agent's report, on one line. */
export function containerLine(v: unknown): string {
  if (v === null || typeof v !== "object") return "not reported";
  const c = v as ContainerState;
  const parts = [
    c.exit_code !== null && c.state !== "running" ? `${c.state} (exit ${c.exit_code})` : c.state,
  ];
  if (c.since) parts[0] += ` since ${c.since}`;
  parts.push(`${c.restart_count} restart${c.restart_count === 1 ? "" : "s"}`);
  if (c.last_crash_at) parts.push(`last crash ${c.last_crash_at}`);
  if (c.held_until) parts.push(`held by the agent until ${c.held_until}`);
  return `${c.name}: ${parts.join(", ")}`;
}

/** "3f1c2a4e… (commit abc123def456, image …) since …": the live release, on one line. */
export function releaseLine(v: unknown): string {
  if (v === null || typeof v !== "object") return "none (not deployed yet)";
  const r = v as {
    deployment_id: string;
    commit_sha: string | null;
    image: string | null;
    since: string;
    rollback_of: string | null;
  };
  const what = [
    r.commit_sha ? `commit ${r.commit_sha.slice(0, 12)}` : "",
    r.image ? `image ${r.image}` : "",
  ].filter(Boolean);
  const rollback = r.rollback_of ? `, a rollback to ${r.rollback_of}` : "";
  return `${r.deployment_id} (${what.join(", ")}${rollback}) since ${r.since}`;
}

/**
 * `env set`'s NAME=value pairs, or one NAME whose value comes from stdin or `file`
 * (a secret kept off argv), as the API's `variables`; the preview env takes the same.
 */
export async function variablesOf(pairs: string[], file?: string): Promise<Record<string, string>> {
  const variables: Record<string, string> = {};
  const bare: string[] = [];
  for (const p of pairs) {
    const i = p.indexOf("=");
    const name = i < 0 ? p : p.slice(0, i);
    if (!ENV_NAME.test(name))
      throw usageError(`'${name}' is not a variable name (letters, digits, _; not starting with a digit)`);
    if (name in variables || bare.includes(name)) throw usageError(`${name} is given twice`);
    if (i < 0) bare.push(name);
    else variables[name] = p.slice(i + 1);
  }
  if (bare.length > 1)
    throw usageError(
      `only one NAME can take its value from stdin or --file (got ${bare.join(", ")}): give the others as NAME=value`,
    );
  if (file && bare.length === 0) throw usageError("--file is the value of a NAME given without =value");
  if (bare[0]) variables[bare[0]] = chompOne(file ? readFileSync(file, "utf8") : await readStdin());
  return variables;
}

/** "on: at most 5, pr-{number}.shop.example.com, forks not built, secrets not copied, 256 MB, 0.5 CPU" */
export function previewsLine(v: unknown): string {
  if (v === null || typeof v !== "object") return "-";
  const p = v as {
    enabled: boolean;
    domain_pattern: string | null;
    max: number;
    allow_forks: boolean;
    copy_secrets: boolean;
    memory_mb: number | null;
    cpus: number | null;
  };
  const parts = [
    `at most ${p.max}`,
    p.domain_pattern ?? "default hostnames",
    p.allow_forks ? "forks built" : "forks not built",
    p.copy_secrets ? "production values copied" : "production values not copied",
    p.memory_mb === null ? "no memory limit" : `${p.memory_mb} MB`,
    p.cpus === null ? "no CPU limit" : `${p.cpus} CPU`,
  ];
  return `${p.enabled ? "on" : "off"}: ${parts.join(", ")}`;
}

export function registerApps(program: Command): void {
  const apps = program
    .command("apps")
    .description("applications: containers on servers, routed at their domains")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl apps list\n  relayctl apps show shop --json\n  relayctl apps create shop --server web-1 --container shop-web --port 3000",
    );

  apps
    .command("list", { isDefault: true })
    .description("list applications")
    .addHelpText("after", "\nExample:\n  relayctl apps list\n  relayctl apps list --json")
    .action(async (_o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const r = await api.call<{ applications: Record<string, unknown>[] }>(
        "GET",
        "/api/applications",
        "dashboard",
      );
      emit(json, r, () =>
        printTable(r.applications, [
          ["ID", "id"],
          ["NAME", "name"],
          ["SERVER", "server_name"],
          ["CONTAINER", "linked_container_name"],
          ["PORT", "container_port"],
          ["URL", "url"],
          ["DOMAINS", "fqdns"],
        ]),
      );
    });

  apps
    .command("show <app>")
    .description("show one application (by name or id)")
    .addHelpText("after", "\nExample:\n  relayctl apps show shop")
    .action(async (name: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, name);
      const full = await api.call<Record<string, unknown>>("GET", `/api/applications/${a.id}`, "dashboard");
      emit(json, full, () =>
        printFields({
          ...full,
          live_release: releaseLine(full.live_release),
          container: containerLine(full.container),
          ...("previews" in full ? { previews: previewsLine(full.previews) } : {}),
        }),
      );
    });

  apps
    .command("create <name>")
    .description("create an application")
    .requiredOption("--server <server>", "server name or id")
    .requiredOption("--container <name>", "linked_container_name: the container's name")
    .requiredOption("--port <port>", "container_port the proxy reaches", Number)
    .option("--fqdn <domain>", "a domain name (repeat for more)", collect, [])
    .option("--pin-port", "refuse external-deploy syncs naming another port")
    .option("--git <url>", "git repository to deploy from")
    .option("--branch <branch>", "deploy branch")
    .addHelpText(
      "after",
      "\nExample:\n  relayctl apps create shop --server web-1 --container shop-web --port 3000 --fqdn shop.example.com",
    )
    .action(async (name: string, o: Record<string, unknown>, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const body: Record<string, unknown> = {
        name,
        server_id: await serverId(api, String(o.server)),
        linked_container_name: o.container,
        container_port: o.port,
        fqdns: o.fqdn,
        ...(o.pinPort ? { pin_port: true } : {}),
        ...(o.git ? { git_repository: o.git } : {}),
        ...(o.branch ? { deploy_branch: o.branch } : {}),
      };
      const created = await api.call("POST", "/api/applications", "dashboard", body);
      emit(json, created, () => printFields(created));
    });

  const env = apps
    .command("env")
    .description("an application's environment variables (values are write-only)")
    .addHelpText(
      "after",
      "\nExamples:\n  printf '%s' \"$DB_PASSWORD\" | relayctl apps env set shop DB_PASSWORD\n  relayctl apps env list shop\n  relayctl apps env unset shop DB_PASSWORD",
    );
  env
    .command("set <app> <pairs...>")
    .description(
      "set variables: NAME=value pairs (several at once), or one NAME whose value is read from stdin (or --file)",
    )
    .option("--file <path>", "read the value of the one NAME from this file instead of stdin")
    .addHelpText(
      "after",
      "\nA value on the command line is visible to other users of this machine and kept in shell history:" +
        "\npass a secret as a NAME alone, its value on stdin.\n" +
        "\nExamples:\n  relayctl apps env set shop LOG_LEVEL=debug REGION=eu" +
        "\n  printf '%s' \"$DB_PASSWORD\" | relayctl apps env set shop DB_PASSWORD" +
        "\n  relayctl apps env set shop TLS_KEY --file ./key.pem",
    )
    .action(async (app: string, pairs: string[], o: { file?: string }, cmd: Command) => {
      const variables = await variablesOf(pairs, o.file);
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      const tid = await tenantId(api);
      const r = await api.call("POST", `/api/tenants/${tid}/applications/${a.id}/env`, "dashboard", {
        variables,
      });
      const names = Object.keys(variables);
      emit(json, r, () =>
        process.stdout.write(
          `Set ${names.join(", ")} on ${a.name} (value${names.length === 1 ? "" : "s"} not shown).\n`,
        ),
      );
    });
  env
    .command("unset <app> <name>")
    .description("remove one variable")
    .addHelpText("after", "\nExample:\n  relayctl apps env unset shop DB_PASSWORD")
    .action(async (app: string, name: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      const tid = await tenantId(api);
      await api.call(
        "DELETE",
        `/api/tenants/${tid}/applications/${a.id}/env/${encodeURIComponent(name)}`,
        "dashboard",
      );
      emit(json, { name, removed: true }, () => process.stdout.write(`Removed ${name} from ${a.name}.\n`));
    });
  env
    .command("list <app>")
    .description("list variable names and when they changed (never values)")
    .addHelpText("after", "\nExample:\n  relayctl apps env list shop")
    .action(async (app: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      const tid = await tenantId(api);
      const r = await api.call<{ variables: Record<string, unknown>[] }>(
        "GET",
        `/api/tenants/${tid}/applications/${a.id}/env`,
        "dashboard",
      );
      emit(json, r, () =>
        printTable(r.variables, [
          ["NAME", "name"],
          ["UPDATED", "updated_at"],
        ]),
      );
    });
}
