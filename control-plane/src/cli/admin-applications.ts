// Operator commands for applications: the same store (validation, domain
// uniqueness, audit events) as /api/applications. Only the database is reached
// from here, so a deleted application's route leaves the proxy at the agent's
// next route sync (the API's DELETE removes it at once).
import type { Command } from "commander";
import type { Knex } from "knex";
import { createApplication, deleteApplication, listApplications } from "../applications/store.js";
import { OPERATOR_ACTOR } from "../auth/automation-key-service.js";
import { AdminError, resolveTenant } from "./admin.js";

type WithDb = (fn: (db: Knex) => Promise<unknown>) => Promise<void>;

const OPERATOR = { ...OPERATOR_ACTOR };

async function resolveServer(db: Knex, tenantId: string, idOrName: string): Promise<string> {
  const row = await db("servers")
    .where({ tenant_id: tenantId })
    .andWhere((q) => q.where({ id: idOrName.toLowerCase() }).orWhere({ name: idOrName }))
    .first<{ id: string } | undefined>("id");
  if (!row) throw new AdminError(`server '${idOrName}' not found in this tenant`);
  return row.id;
}

const collect = (value: string, previous: string[]) => [...previous, value];

export function registerApplicationCommands(admin: Command, withDb: WithDb): void {
  admin
    .command("create-application")
    .description("create an application: a container on a server, routed at its domain names")
    .requiredOption("--tenant <id|name>", "tenant id or name")
    .requiredOption("--server <id|name>", "server the container runs on")
    .requiredOption("--name <name>", "application name (unique in the tenant)")
    .requiredOption("--container <name>", "linked_container_name: the container name pipelines use")
    .requiredOption("--port <n>", "container_port the proxy reaches (1-65535)")
    .option("--fqdn <domain>", "a bound domain name (repeat for more)", collect, [])
    .option("--pin-port", "external-deploy syncs must name --port (any other port is refused)", false)
    .action(
      (o: {
        tenant: string;
        server: string;
        name: string;
        container: string;
        port: string;
        fqdn: string[];
        pinPort: boolean;
      }) =>
        withDb(async (db) => {
          const tenant = await resolveTenant(db, o.tenant);
          const port = Number(o.port);
          if (!Number.isInteger(port) || port < 1 || port > 65535) {
            throw new AdminError("--port: a whole number from 1 to 65535");
          }
          if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}$/.test(o.container)) {
            throw new AdminError("--container: a container name ([a-zA-Z0-9][a-zA-Z0-9_.-]*, at most 255)");
          }
          const input = {
            name: o.name,
            server_id: await resolveServer(db, tenant.id, o.server),
            linked_container_name: o.container,
            container_port: port,
            pin_port: o.pinPort,
            fqdns: o.fqdn,
          };
          return createApplication(db, tenant.id, input, OPERATOR);
        }),
    );

  admin
    .command("list-applications")
    .requiredOption("--tenant <id|name>", "tenant id or name")
    .action((o: { tenant: string }) =>
      withDb(async (db) => ({
        applications: await listApplications(db, (await resolveTenant(db, o.tenant)).id),
      })),
    );

  admin
    .command("delete-application")
    .requiredOption("--tenant <id|name>", "tenant id or name")
    .requiredOption("--id <application id>", "application id")
    .action((o: { tenant: string; id: string }) =>
      withDb(async (db) => {
        const tenant = await resolveTenant(db, o.tenant);
        const row = await deleteApplication(db, tenant.id, o.id, OPERATOR);
        return { application_id: row.id, deleted: true };
      }),
    );
}
