// keys: automation keys (rca_) for pipelines: create with scopes, list, revoke.
import type { Command } from "commander";
import { collect, ctxOf, serverId } from "../context.js";
import { emit, printFields, printTable } from "../output.js";

export function registerKeys(program: Command): void {
  const keys = program
    .command("keys")
    .description("automation keys (rca_) for CI pipelines")
    .addHelpText(
      "after",
      "\nExamples:\n  relayctl keys list\n  relayctl keys create ci-shop --operation deploy\n  relayctl keys revoke 6f1c2a4e-...",
    );
  keys
    .command("create <name>")
    .description("create a key; its secret is printed once")
    .option("--server <server>", "a server the key may target (repeat; default all)", collect, [])
    .option(
      "--operation <op>",
      "an allowed operation: exec, deploy, restart, reboot, registry_login, registry_logout, external_deploy (repeat; default all)",
      collect,
      [],
    )
    .option("--ip <cidr>", "an IP or CIDR range the key may be used from (repeat; default any)", collect, [])
    .option("--credential <id>", "a registry credential the key may use (repeat; default all)", collect, [])
    .option("--rate-limit <n>", "requests per minute (1-1000, default 100)", Number)
    .option("--expires-at <iso>", "expiry, ISO 8601 with a zone")
    .addHelpText(
      "after",
      "\nExample:\n  relayctl keys create ci-shop --server web-1 --operation exec --operation deploy --rate-limit 300",
    )
    .action(async (name: string, o: Record<string, unknown>, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const servers = [];
      for (const s of o.server as string[]) servers.push(await serverId(api, s));
      const body = {
        name,
        ...(servers.length ? { servers } : {}),
        ...((o.operation as string[]).length ? { operations: o.operation } : {}),
        ...((o.ip as string[]).length ? { ip_allowlist: o.ip } : {}),
        ...((o.credential as string[]).length ? { allowed_credential_ids: o.credential } : {}),
        ...(o.rateLimit !== undefined ? { rate_limit: o.rateLimit } : {}),
        ...(o.expiresAt ? { expires_at: o.expiresAt } : {}),
      };
      const k = await api.call("POST", "/api/automation-keys", "dashboard", body);
      emit(json, k, () => {
        printFields(k, ["id", "name", "servers", "operations", "ip_allowlist", "rate_limit", "expires_at"]);
        process.stdout.write(`key  ${k.key}\n(shown once: store it in your CI's secrets now)\n`);
      });
    });
  keys
    .command("list", { isDefault: true })
    .description("list live keys (never their secrets)")
    .addHelpText("after", "\nExample:\n  relayctl keys list --json")
    .action(async (_o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      const r = await api.call<{ automation_keys: Record<string, unknown>[] }>(
        "GET",
        "/api/automation-keys",
        "dashboard",
      );
      emit(json, r, () =>
        printTable(r.automation_keys, [
          ["ID", "id"],
          ["NAME", "name"],
          ["OPERATIONS", "operations"],
          ["RATE", "rate_limit"],
          ["EXPIRES", "expires_at"],
        ]),
      );
    });
  keys
    .command("revoke <id>")
    .description("revoke a key: its next request is refused")
    .addHelpText("after", "\nExample:\n  relayctl keys revoke 6f1c2a4e-...")
    .action(async (id: string, _o: unknown, cmd: Command) => {
      const { api, json } = ctxOf(cmd);
      await api.call("DELETE", `/api/automation-keys/${encodeURIComponent(id)}`, "dashboard");
      emit(json, { id, revoked: true }, () => process.stdout.write(`Revoked ${id}.\n`));
    });
}
