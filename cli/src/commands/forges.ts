// forges: GitLab, Gitea and Forgejo connections (docs/forges.md), and `apps link`
// / `apps unlink` to a project of one. The API token is read from stdin only
// (the API seals it and never returns it); the webhook secret is shown once, at `add`.
import type { Command } from "commander";
import { application, chompOne, ctxOf, readStdin } from "../context.js";
import { CliError, EXIT, usageError } from "../errors.js";
import { emit, printFields, printTable } from "../output.js";
import type { Api } from "../client.js";

const KINDS = ["gitlab", "gitea", "forgejo"];

type Forge = { id: string; name: string } & Record<string, unknown>;

/** A connection by its id or name. */
async function forge(api: Api, nameOrId: string): Promise<Forge> {
  const { forges } = await api.call<{ forges: Forge[] }>("GET", "/api/forges", "dashboard");
  const f = forges.find((x) => x.id === nameOrId.toLowerCase() || x.name === nameOrId);
  if (!f) throw new CliError(`forge connection '${nameOrId}' not found`, EXIT.refused);
  return f;
}

export function registerForges(program: Command): void {
  const forges = program
    .command("forges")
    .description("GitLab, Gitea and Forgejo connections (push to deploy, previews, commit statuses)")
    .addHelpText(
      "after",
      "\nExamples:\n  printf '%s' \"$GITLAB_TOKEN\" | relayctl forges add work --kind gitlab --base-url https://gitlab.example.com\n  relayctl forges list\n  relayctl apps link shop --forge work --project group/shop\n  relayctl forges remove work",
    );
  forges
    .command("add <name>")
    .description(
      "connect a forge; its project access token is read from stdin; prints the webhook URL and secret (shown once)",
    )
    .requiredOption("--kind <kind>", `the forge: ${KINDS.join(", ")}`)
    .requiredOption("--base-url <url>", "the forge's address, https://gitlab.example.com")
    .addHelpText(
      "after",
      "\nExample:\n  printf '%s' \"$GITEA_TOKEN\" | relayctl forges add home --kind gitea --base-url https://git.example.com",
    )
    .action(async (name: string, o: { kind: string; baseUrl: string }, cmd: Command) => {
      if (!KINDS.includes(o.kind)) throw usageError(`forges add: --kind is one of ${KINDS.join(", ")}`);
      const token = chompOne(await readStdin());
      if (!token) throw usageError("forges add: the API token on stdin is empty");
      const { api, json } = ctxOf(cmd);
      const c = await api.call("POST", "/api/forges", "dashboard", {
        kind: o.kind,
        name,
        base_url: o.baseUrl,
        api_token: token,
      });
      emit(json, c, () => {
        printFields(c);
        process.stdout.write(
          "\nAdd a webhook in the forge's project settings with this URL and secret (shown only now): docs/forges.md\n",
        );
      });
    });
  forges
    .command("list", { isDefault: true })
    .description("list connections (never tokens or secrets)")
    .addHelpText("after", "\nExample:\n  relayctl forges list")
    .action(async (_o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const r = await api.call<{ forges: Record<string, unknown>[] }>("GET", "/api/forges", "dashboard");
      emit(json, r, () =>
        printTable(r.forges, [
          ["ID", "id"],
          ["NAME", "name"],
          ["KIND", "kind"],
          ["URL", "base_url"],
          ["WEBHOOK", "webhook_url"],
        ]),
      );
    });
  forges
    .command("remove <connection>")
    .description("delete a connection (refused while applications are linked to it)")
    .addHelpText("after", "\nExample:\n  relayctl forges remove work")
    .action(async (ref: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const f = await forge(api, ref);
      await api.call("DELETE", `/api/forges/${f.id}`, "dashboard");
      emit(json, { id: f.id, removed: true }, () => process.stdout.write(`Removed ${f.name}.\n`));
    });

  const apps = program.commands.find((c) => c.name() === "apps");
  if (!apps) throw new Error("registerForges: register the apps command first");
  apps
    .command("link <app>")
    .description("link an application to a GitLab/Gitea/Forgejo project: its pushes deploy it")
    .requiredOption("--forge <connection>", "the connection's name or id (relayctl forges list)")
    .requiredOption("--project <path>", "group/sub/repo (GitLab: or its numeric id), owner/repo on Gitea")
    .addHelpText("after", "\nExample:\n  relayctl apps link shop --forge work --project acme/web/shop")
    .action(async (ref: string, o: { forge: string; project: string }, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const [a, f] = await Promise.all([application(api, ref), forge(api, o.forge)]);
      const r = await api.call("PUT", `/api/applications/${a.id}/forge-repository`, "dashboard", {
        connection_id: f.id,
        project: o.project,
      });
      emit(json, r, () => printFields(r));
    });
  apps
    .command("unlink <app>")
    .description("unlink an application from its forge project")
    .addHelpText("after", "\nExample:\n  relayctl apps unlink shop")
    .action(async (ref: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, ref);
      await api.call("DELETE", `/api/applications/${a.id}/forge-repository`, "dashboard");
      emit(json, { id: a.id, unlinked: true }, () => process.stdout.write(`Unlinked ${a.name}.\n`));
    });
}
