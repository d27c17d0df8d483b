// Webhook deliveries as GitHub sends them to a control plane: signed with the
// App's secret by @octokit/webhooks (X-Hub-Signature-256 over the body), and their
// outcome read back once processed (from the database: an API key's contract
// limit of 100 requests a minute would be spent polling in seconds).
import { randomUUID } from "node:crypto";
import { describe } from "./assertions";
import type { DeployStack } from "./deploy-stack";
import type { Database } from "./mariadb";
import { pollUntil } from "./wait";

// biome-ignore lint/suspicious/noExplicitAny: payloads and outcomes are read field by field
type Json = Record<string, any>;

export interface GitHubWebhooks {
  /** Signs and posts one delivery; its X-GitHub-Delivery id (throws unless answered 202). */
  deliver(event: string, payload: Json): Promise<string>;
  /** The delivery's outcome once processed (done or failed). */
  processed(id: string): Promise<Json>;
}

export async function githubWebhooks(baseUrl: string, db: Database, secret: string): Promise<GitHubWebhooks> {
  const { Webhooks } = await import("@octokit/webhooks");
  const webhooks = new Webhooks({ secret });
  return {
    async deliver(event, payload) {
      const body = JSON.stringify(payload);
      const id = randomUUID();
      const res = await fetch(`${baseUrl}/webhooks/github`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-github-event": event,
          "x-github-delivery": id,
          "x-hub-signature-256": await webhooks.sign(body),
        },
        body,
      });
      if (res.status !== 202) throw new Error(`delivery: ${res.status} ${await res.text()}`);
      return id;
    },
    async processed(id) {
      await pollUntil(
        async () =>
          (
            await db.query("SELECT 1 FROM github_deliveries WHERE id = ? AND status IN ('done','failed')", [
              id,
            ])
          ).length === 1 || undefined,
        { what: `delivery ${id} processed`, timeoutMs: 60_000 },
      );
      const rows = await db.query<{ outcome: string }>("SELECT outcome FROM github_deliveries WHERE id = ?", [
        id,
      ]);
      return JSON.parse(String(rows[0]!.outcome)) as Json;
    },
  };
}

/**
 * The App's installation on one repository as its `installation` `created` delivery (GitHub's
 * example payload, `created`) tells it, bound to the stack's tenant as the setup URL's flow
 * (github-app.test.ts's subject) leaves it.
 */
export async function bindInstallation(
  s: DeployStack,
  hooks: GitHubWebhooks,
  created: Json,
  o: { installation: number; repositoryId: number; fullName: string },
): Promise<void> {
  const payload = structuredClone(created);
  payload.installation = { ...payload.installation, id: o.installation };
  payload.repositories = [
    { id: o.repositoryId, name: o.fullName.split("/")[1], full_name: o.fullName, private: true },
  ];
  await hooks.processed(await hooks.deliver("installation", payload));
  await s.c.db.query("UPDATE github_installations SET tenant_id = ? WHERE id = ?", [
    s.tenantId,
    o.installation,
  ]);
}

/** The installation bound (bindInstallation), and the application linked to the repository. */
export async function installAndLink(
  s: DeployStack,
  hooks: GitHubWebhooks,
  created: Json,
  o: { installation: number; repositoryId: number; fullName: string; applicationId: string },
): Promise<void> {
  await bindInstallation(s, hooks, created, o);
  const linked = await s.manage(s.appPath(o.applicationId, "/github-repository"), {
    method: "PUT",
    body: { repository_id: o.repositoryId },
  });
  if (linked.status !== 200) throw new Error(`link: ${describe(linked)}`);
}
