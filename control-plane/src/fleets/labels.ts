// Server labels (issue 33): k=v pairs an application's placement selects servers
// by (`region=eu,role=web`). Keys and values follow Kubernetes' label syntax,
// simplified: 1 to 63 of [A-Za-z0-9._-], starting and ending alphanumeric (a
// value may be empty). Stored as a JSON object in servers.labels; set through
// PUT /api/servers/{id}/labels and at enrollment (`relayctl-agent enroll --label`).
import type { Knex } from "knex";
import { z } from "zod";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";

export type Labels = Record<string, string>;

const PART = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/;
/** At most this many labels per server. */
export const MAX_LABELS = 64;

export const labelKey = z
  .string()
  .regex(PART, { error: "a label key is 1-63 of A-Z a-z 0-9 . _ -, starting and ending alphanumeric" });
export const labelValue = z.string().refine((v) => v === "" || PART.test(v), {
  error: "a label value is empty or 1-63 of A-Z a-z 0-9 . _ -, starting and ending alphanumeric",
});
export const labelsSchema = z
  .record(labelKey, labelValue)
  .refine((l) => Object.keys(l).length <= MAX_LABELS, { error: `at most ${MAX_LABELS} labels` })
  .describe("labels as {key: value}");

/** A row's labels column as an object ({} when none). */
export function labelsOf(column: unknown): Labels {
  if (typeof column !== "string" || column === "") return {};
  return JSON.parse(column) as Labels;
}

/** Stores a labels object in its canonical form (keys sorted). */
export const labelsColumn = (l: Labels): string =>
  JSON.stringify(Object.fromEntries(Object.entries(l).sort(([a], [b]) => (a < b ? -1 : 1))));

/** PUT /api/servers/{id}/labels: replaces the server's labels, audited server.labels_changed. */
export async function setServerLabels(
  db: Knex,
  tenantId: string,
  serverId: string,
  labels: Labels,
  actor: Record<string, unknown>,
): Promise<{ server_id: string; labels: Labels }> {
  return db.transaction(async (trx) => {
    const row = await trx("servers")
      .where({ id: serverId.toLowerCase(), tenant_id: tenantId, removed_at: null })
      .first<{ id: string; name: string; labels: string | null } | undefined>("id", "name", "labels");
    if (!row) throw new RcError("RC_ERR_SERVER_NOT_FOUND", `server '${serverId}' not found`);
    await trx("servers")
      .where({ id: row.id })
      .update({ labels: labelsColumn(labels) });
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "server.labels_changed",
      serverId: row.id,
      payload: { server_id: row.id, server_name: row.name, before: labelsOf(row.labels), labels, ...actor },
    });
    return { server_id: row.id, labels: labelsOf(labelsColumn(labels)) };
  });
}
