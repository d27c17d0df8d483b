// previews: an application's preview environments (issue 32). list; create one from a
// ref or an image (what a CI pipeline does with an image it built), with --wait or
// --follow like deploy; remove one by its name or id; and the env previews get instead
// of production's (write-only, like `apps env`). A preview is an application of its own:
// `relayctl deployments`, `logs` and the rest take its id.
import { UUID } from "@relayctl/reverse-proxy-sync/uuid";
import type { Command } from "commander";
import type { Api } from "../client.js";
import { type AppRef, application, ctxOf, tenantId } from "../context.js";
import { CliError, EXIT, usageError } from "../errors.js";
import { emit, printFields, printTable } from "../output.js";
import { variablesOf } from "./apps.js";
import { age } from "./deployments.js";
import { finish } from "./deploy.js";

export interface Preview {
  id: string;
  key: string;
  name: string;
  number: number | null;
  source: string;
  head_ref: string;
  head_sha: string | null;
  image: string | null;
  url: string | null;
  pull_request_url: string | null;
  status: string;
  last_deployment: { deployment_id: string; status: string } | null;
  created_at: string;
}

const NAME = /^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$/;

const previewsPath = (a: AppRef) => `/api/applications/${a.id}/previews`;

export async function listPreviews(api: Api, a: AppRef): Promise<Preview[]> {
  return (await api.call<{ previews: Preview[] }>("GET", previewsPath(a), "dashboard")).previews;
}

/** A preview of `a` by its name (key), its application's name or its id. */
async function previewOf(api: Api, a: AppRef, nameOrId: string): Promise<Preview> {
  const list = await listPreviews(api, a);
  const id = nameOrId.toLowerCase();
  const p = list.find((x) => (UUID.test(id) && x.id === id) || x.key === nameOrId || x.name === nameOrId);
  if (!p) throw new CliError(`preview '${nameOrId}' of ${a.name} not found`, EXIT.refused);
  return p;
}

export function registerPreviews(program: Command): void {
  const previews = program
    .command("previews")
    .description("an application's preview environments: one per pull request, or made here or by CI")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl previews list shop\n  relayctl previews create shop --name pr-12 --ref feature/cart --follow\n  relayctl previews create shop --name ci-481 --image registry.example.com/shop:481 --wait\n  relayctl previews remove shop pr-12",
    );

  previews
    .command("list <app>")
    .description("list an application's previews, newest first")
    .addHelpText("after", "\nExample:\n  relayctl previews list shop --json")
    .action(async (app: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      const list = await listPreviews(api, a);
      emit(json, { previews: list }, () =>
        printTable(
          list.map((p) => ({
            ...p,
            source: p.number === null ? p.source : `${p.source} #${p.number}`,
            head: p.image ?? `${p.head_ref}${p.head_sha ? ` ${p.head_sha.slice(0, 12)}` : ""}`,
            last: p.last_deployment ? p.last_deployment.status : "-",
            age: age(p.created_at),
          })),
          [
            ["NAME", "key"],
            ["STATUS", "status"],
            ["URL", "url"],
            ["SOURCE", "source"],
            ["HEAD", "head"],
            ["LAST DEPLOY", "last"],
            ["AGE", "age"],
            ["ID", "id"],
          ],
        ),
      );
    });

  previews
    .command("create <app>")
    .description("create a preview (or deploy an existing one anew) from a ref or an image")
    .requiredOption("--name <name>", "the preview's name: 1-40 of a-z, 0-9 and '-' (not first or last)")
    .option("--ref <ref>", "branch, tag or commit to build (default: the application's deploy branch)")
    .option("--image <image>", "an image to run instead of a build (e.g. one CI pushed)")
    .option("--wait", "wait for the deployment's outcome; exit non-zero unless it went live")
    .option("--follow", "as --wait, printing the deployment's steps and live log")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl previews create shop --name pr-12 --ref feature/cart --follow\n  relayctl previews create shop --name ci-481 --image registry.example.com/shop:481 --wait",
    )
    .action(
      async (
        app: string,
        o: { name: string; ref?: string; image?: string; wait?: boolean; follow?: boolean },
        cmd: Command,
      ) => {
        if (!NAME.test(o.name))
          throw usageError("--name: 1-40 characters of a-z, 0-9 and '-' (not first or last)");
        if (o.ref && o.image)
          throw usageError("--ref and --image: give one (a ref is built, an image is run)");
        const { api, json } = ctxOf(cmd);
        const a = await application(api, app);
        const started = await api.call<{ preview: Preview; deployment_id: string; operation_id: string }>(
          "POST",
          previewsPath(a),
          "dashboard",
          { name: o.name, ...(o.ref ? { ref: o.ref } : {}), ...(o.image ? { image: o.image } : {}) },
        );
        const p = started.preview;
        if (!o.wait && !o.follow) {
          emit(json, started, () =>
            process.stdout.write(
              [
                `Preview ${p.key} of ${a.name}: deployment ${started.deployment_id} started.`,
                ...(p.url ? [`URL: ${p.url}`] : []),
                `Follow it: relayctl deploy ${p.id} --follow ${started.deployment_id}`,
                "",
              ].join("\n"),
            ),
          );
          return;
        }
        if (!json)
          process.stderr.write(
            `Preview ${p.key} of ${a.name}: deployment ${started.deployment_id} started.\n`,
          );
        const tid = await tenantId(api);
        await finish(
          api,
          json,
          `/api/tenants/${tid}/applications/${p.id}/deployments/${started.deployment_id}`,
          !o.follow,
        );
      },
    );

  previews
    .command("remove <app> <preview>")
    .description("remove a preview (by name or id): its containers, images and route go")
    .addHelpText("after", "\nExample:\n  relayctl previews remove shop pr-12")
    .action(async (app: string, preview: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      const p = await previewOf(api, a, preview);
      await api.call("DELETE", `${previewsPath(a)}/${p.id}`, "dashboard");
      emit(json, { id: p.id, key: p.key, removed: true }, () =>
        process.stdout.write(`Removing the preview ${p.key} of ${a.name} (containers, images and route).\n`),
      );
    });

  previews
    .command("show <app> <preview>")
    .description("show one preview (by name or id)")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl previews show shop pr-12\n  relayctl previews show shop ci-481 --json",
    )
    .action(async (app: string, preview: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      const p = await previewOf(api, a, preview);
      emit(json, p, () => printFields({ ...p, last_deployment: p.last_deployment?.deployment_id ?? null }));
    });

  registerPreviewEnv(previews);
}

function registerPreviewEnv(previews: Command): void {
  const env = previews
    .command("env")
    .description("the values previews get for production's variable names (write-only)")
    .addHelpText(
      "after",
      "\nA preview gets, for each of production's names, its preview value; without one, production's value only when the application copies secrets to previews, else nothing. A fork's preview gets none.\n" +
        "\nExamples:\n  relayctl previews env set shop DATABASE_URL=postgres://preview-db/shop\n  printf '%s' \"$STRIPE_TEST_KEY\" | relayctl previews env set shop STRIPE_KEY\n  relayctl previews env list shop\n  relayctl previews env unset shop DATABASE_URL",
    );
  const base = (a: AppRef) => `/api/applications/${a.id}/preview-env`;
  env
    .command("set <app> <pairs...>")
    .description(
      "set preview values: NAME=value pairs, or one NAME whose value is read from stdin (or --file)",
    )
    .option("--file <path>", "read the value of the one NAME from this file instead of stdin")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl previews env set shop DATABASE_URL=postgres://preview-db/shop LOG_LEVEL=debug\n  printf '%s' \"$STRIPE_TEST_KEY\" | relayctl previews env set shop STRIPE_KEY",
    )
    .action(async (app: string, pairs: string[], o: { file?: string }, cmd: Command) => {
      const variables = await variablesOf(pairs, o.file);
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      const r = await api.call("PUT", base(a), "dashboard", { variables });
      const names = Object.keys(variables);
      emit(json, r, () =>
        process.stdout.write(`Set ${names.join(", ")} for the previews of ${a.name} (not shown).\n`),
      );
    });
  env
    .command("unset <app> <name>")
    .description("remove one preview value")
    .addHelpText("after", "\nExample:\n  relayctl previews env unset shop DATABASE_URL")
    .action(async (app: string, name: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      await api.call("DELETE", `${base(a)}/${encodeURIComponent(name)}`, "dashboard");
      emit(json, { name, removed: true }, () =>
        process.stdout.write(`Removed ${name} from the previews of ${a.name}.\n`),
      );
    });
  env
    .command("list <app>")
    .description("list preview value names and when they changed (never values)")
    .addHelpText("after", "\nExample:\n  relayctl previews env list shop --json")
    .action(async (app: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const a = await application(api, app);
      const r = await api.call<{ variables: Record<string, unknown>[] }>("GET", base(a), "dashboard");
      emit(json, r, () =>
        printTable(r.variables, [
          ["NAME", "name"],
          ["UPDATED", "updated_at"],
        ]),
      );
    });
}
