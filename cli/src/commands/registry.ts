// registry: stored container-registry credentials. The password is read from
// stdin only and never shown again (the API seals it and never returns it).
import type { Command } from "commander";
import { chompOne, ctxOf, readStdin } from "../context.js";
import { usageError } from "../errors.js";
import { emit, printFields, printTable } from "../output.js";

export function registerRegistry(program: Command): void {
  const reg = program
    .command("registry")
    .description("container registry credentials")
    .addHelpText(
      "after",
      "\nExamples:\n  printf '%s' \"$GHCR_TOKEN\" | relayctl registry add ghcr --registry ghcr.io --username me\n  relayctl registry list\n  relayctl registry remove 9b2e...",
    );
  reg
    .command("add <name>")
    .description("store a credential; the password is read from stdin")
    .requiredOption(
      "--registry <address>",
      "registry address (docker.io, ghcr.io, registry.example.com:5000...)",
    )
    .requiredOption("--username <user>", "user name")
    .addHelpText(
      "after",
      "\nExample:\n  printf '%s' \"$GHCR_TOKEN\" | relayctl registry add ghcr --registry ghcr.io --username me",
    )
    .action(async (name: string, o: { registry: string; username: string }, cmd: Command) => {
      const password = chompOne(await readStdin());
      if (!password) throw usageError("registry add: the password on stdin is empty");
      const { api, json } = ctxOf(cmd);
      const c = await api.call("POST", "/api/registry-credentials", "dashboard", {
        name,
        registry_url: o.registry,
        username: o.username,
        password,
      });
      emit(json, c, () => printFields(c));
    });
  reg
    .command("list", { isDefault: true })
    .description("list credentials (never passwords)")
    .addHelpText("after", "\nExample:\n  relayctl registry list")
    .action(async (_o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const r = await api.call<Record<string, unknown>[] | { credentials?: Record<string, unknown>[] }>(
        "GET",
        "/api/registry-credentials",
        "dashboard",
      );
      const rows = Array.isArray(r)
        ? r
        : ((r as { credentials?: Record<string, unknown>[] }).credentials ?? []);
      emit(json, r, () =>
        printTable(rows, [
          ["ID", "id"],
          ["NAME", "name"],
          ["REGISTRY", "registry_url"],
          ["TYPE", "registry_type"],
          ["USER", "username"],
        ]),
      );
    });
  reg
    .command("remove <id>")
    .description("delete a credential")
    .addHelpText("after", "\nExample:\n  relayctl registry remove 9b2e...")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      await api.call("DELETE", `/api/registry-credentials/${encodeURIComponent(id)}`, "dashboard");
      emit(json, { id, removed: true }, () => process.stdout.write(`Removed ${id}.\n`));
    });
}
