// Operator commands for people: create a tenant's first owner (or any user), so
// someone can sign in before anyone can invite. The password is read from
// stdin, never from argv (argv is visible to every user of the machine).
import type { Command } from "commander";
import type { Knex } from "knex";
import { createOwner, presentUser } from "../accounts/users.js";
import { RcError } from "../errors.js";
import { AdminError, resolveTenant } from "./admin.js";

type WithDb = (fn: (db: Knex) => Promise<unknown>) => Promise<void>;

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  // One trailing newline is the terminal's, not the password's.
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
}

export function registerUserCommands(admin: Command, withDb: WithDb): void {
  admin
    .command("create-owner")
    .description("create a user with the owner role (the tenant's first); the password is read from stdin")
    .requiredOption("--tenant <id|name>", "tenant id or name")
    .requiredOption("--email <address>", "the owner's e-mail address (their sign-in name)")
    .option(
      "--password-stdin",
      "read the password from stdin (the only way: never pass it as an argument)",
      true,
    )
    .addHelpText(
      "after",
      "\nExample:\n  printf '%s' \"$PASSWORD\" | relayctl-server admin create-owner --tenant acme --email ops@acme.test",
    )
    .action((o: { tenant: string; email: string }) =>
      withDb(async (db) => {
        const tenant = await resolveTenant(db, o.tenant);
        const password = await readStdin();
        try {
          return presentUser(await createOwner(db, tenant.id, o.email, password));
        } catch (err) {
          if (err instanceof RcError) throw new AdminError(err.detail);
          throw err;
        }
      }),
    );
}
