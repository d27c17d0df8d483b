// Installations and the repositories they reach, kept in step with GitHub by
// the `installation`, `installation_repositories` and `repository` events.
// Nothing here decides a tenant: an installation is bound only through the
// setup URL (install-state.ts). A repository is keyed by GitHub's id, so an
// application linked to it follows renames and transfers; one that leaves the
// installation (or is deleted) is marked removed and deploys nothing after.
import type { Knex } from "knex";
import { type GitHubRepository, repositoryOf } from "./app-client.js";
import type { Payload } from "./context.js";
import type { Outcome } from "./deliveries.js";

export interface InstallationRow {
  id: number;
  tenant_id: string | null;
  account_login: string;
  account_type: string;
  suspended_at: number | null;
  deleted_at: number | null;
}

export async function upsertInstallation(db: Knex, inst: Payload, now = Date.now()): Promise<void> {
  await db("github_installations")
    .insert({
      id: Number(inst.id),
      account_login: String(inst.account?.login ?? ""),
      account_type: String(inst.account?.type ?? "User"),
      suspended_at: inst.suspended_at ? Date.parse(inst.suspended_at) || now : null,
      deleted_at: null,
      created_at: now,
      updated_at: now,
    })
    .onConflict("id")
    .merge(["account_login", "account_type", "suspended_at", "deleted_at", "updated_at"]);
}

export async function upsertRepository(
  db: Knex,
  installationId: number | null,
  r: Partial<GitHubRepository> & { id: number; full_name: string },
  now = Date.now(),
): Promise<void> {
  const row: Record<string, unknown> = {
    id: r.id,
    installation_id: installationId,
    full_name: r.full_name,
    private: r.private ?? true,
    removed_at: null,
    updated_at: now,
  };
  const merge = ["installation_id", "full_name", "private", "removed_at", "updated_at"];
  for (const k of ["default_branch", "archived", "clone_url"] as const)
    if (r[k] !== undefined && r[k] !== null) {
      row[k] = r[k];
      merge.push(k);
    }
  await db("github_repositories").insert(row).onConflict("id").merge(merge);
  // Applications follow the repository by id: a rename or transfer moves their clone URL.
  if (r.clone_url)
    await db("applications").where({ github_repository_id: r.id }).update({ git_repository: r.clone_url });
}

async function removeRepositories(db: Knex, installationId: number, ids: number[] | "all") {
  const q = db("github_repositories").where({ installation_id: installationId }).whereNull("removed_at");
  if (ids !== "all") q.whereIn("id", ids);
  return q.update({ removed_at: Date.now(), updated_at: Date.now() });
}

export async function installationEvent(db: Knex, action: string, p: Payload): Promise<Outcome> {
  const inst = p.installation ?? {};
  const id = Number(inst.id);
  const now = Date.now();
  switch (action) {
    case "created":
    case "new_permissions_accepted":
    case "unsuspend":
    case "suspend": {
      await upsertInstallation(
        db,
        {
          ...inst,
          suspended_at:
            action === "suspend"
              ? (inst.suspended_at ?? new Date(now).toISOString())
              : action === "unsuspend"
                ? null
                : inst.suspended_at,
        },
        now,
      );
      for (const r of (p.repositories ?? []) as Payload[])
        await upsertRepository(
          db,
          id,
          { id: Number(r.id), full_name: String(r.full_name), private: Boolean(r.private) },
          now,
        );
      return {
        result: action === "suspend" ? "suspended" : "recorded",
        detail: `installation ${id} (${inst.account?.login ?? "?"}) ${action}`,
      };
    }
    case "deleted": {
      await db("github_installations").where({ id }).update({ deleted_at: now, updated_at: now });
      const n = await removeRepositories(db, id, "all");
      return {
        result: "deleted",
        detail: `installation ${id} deleted; ${n} repositories no longer reachable`,
      };
    }
    default:
      return { result: "ignored", detail: `installation action '${action}' needs nothing` };
  }
}

export async function installationRepositoriesEvent(db: Knex, _action: string, p: Payload): Promise<Outcome> {
  const id = Number(p.installation?.id);
  if (!(await db("github_installations").where({ id }).first("id")))
    await upsertInstallation(db, p.installation);
  const added = (p.repositories_added ?? []) as Payload[];
  const removed = (p.repositories_removed ?? []) as Payload[];
  for (const r of added)
    await upsertRepository(db, id, {
      id: Number(r.id),
      full_name: String(r.full_name),
      private: Boolean(r.private),
    });
  if (removed.length > 0)
    await removeRepositories(
      db,
      id,
      removed.map((r) => Number(r.id)),
    );
  return {
    result: "recorded",
    detail: `installation ${id}: ${added.length} repositories added, ${removed.length} removed`,
  };
}

export async function repositoryEvent(db: Knex, action: string, p: Payload): Promise<Outcome> {
  const repo = repositoryOf(p.repository ?? {});
  const installationId = p.installation?.id ? Number(p.installation.id) : null;
  const known = await db("github_repositories").where({ id: repo.id }).first("id", "installation_id");
  if (action === "deleted") {
    await db("github_repositories")
      .where({ id: repo.id })
      .update({ removed_at: Date.now(), updated_at: Date.now() });
    return { result: "deleted", detail: `repository ${repo.full_name} (${repo.id}) deleted` };
  }
  if (!known && action !== "created")
    return {
      result: "ignored",
      detail: `repository ${repo.full_name} (${repo.id}) is not reachable by a known installation`,
    };
  await upsertRepository(db, installationId ?? known?.installation_id ?? null, repo);
  return { result: "recorded", detail: `repository ${repo.full_name} (${repo.id}) ${action}` };
}

/** The repository and its installation, when the repository is still reachable. */
export async function reachableRepository(db: Knex, repositoryId: number) {
  return db("github_repositories as r")
    .join("github_installations as i", "i.id", "r.installation_id")
    .where({ "r.id": repositoryId })
    .first<
      | {
          id: number;
          full_name: string;
          clone_url: string | null;
          private: number | boolean;
          removed_at: number | null;
          installation_id: number;
          tenant_id: string | null;
          suspended_at: number | null;
          deleted_at: number | null;
        }
      | undefined
    >(
      "r.id",
      "r.full_name",
      "r.clone_url",
      "r.private",
      "r.removed_at",
      "r.installation_id",
      "i.tenant_id",
      "i.suspended_at",
      "i.deleted_at",
    );
}

/** Why an application linked to this repository cannot deploy for `tenantId`, or null when it can. */
export function cannotDeploy(
  r: Awaited<ReturnType<typeof reachableRepository>>,
  tenantId: string,
): string | null {
  if (!r) return "the repository is not reachable by any installation of the GitHub App";
  // Before removed_at: an uninstall marks every repository of the installation removed too.
  if (r.deleted_at) return `the GitHub App was uninstalled (installation ${r.installation_id})`;
  if (r.removed_at)
    return `the repository ${r.full_name} was removed from the GitHub App installation (or deleted)`;
  if (r.suspended_at) return `the GitHub App installation ${r.installation_id} is suspended`;
  if (r.tenant_id !== tenantId)
    return `the GitHub App installation ${r.installation_id} is not bound to this tenant`;
  return null;
}
