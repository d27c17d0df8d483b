import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import pino from "pino";
import { migrate, openDb } from "../db/knex.js";
import { AckWriter } from "./ack-writer.js";

test("ack writer - an ack whose result came first is not written; the others are, only for their own server", async (t) => {
  const db = openDb(`sqlite://${join(mkdtempSync(join(tmpdir(), "relayctl-acks-")), "db.sqlite")}`);
  t.teardown(() => db.destroy());
  await migrate(db);
  const now = Date.now();
  await db("tenants").insert({ id: "t1", name: "t1", created_at: now });
  for (const id of ["s1", "s2"])
    await db("servers").insert({ id, tenant_id: "t1", name: id, created_at: now });
  const op = (id: string, server: string) => ({
    id,
    tenant_id: "t1",
    server_id: server,
    operation_type: "exec",
    status: "running",
    delivery: "pending",
    started_at: now,
    deadline_at: now + 60_000,
  });
  await db("operations").insert([op("settled", "s1"), op("pending", "s1"), op("other", "s2")]);
  const acks = new AckWriter(db, pino({ level: "silent" }));
  acks.add("s1", "settled");
  acks.add("s1", "pending");
  acks.add("s1", "other"); // s1's agent acking s2's operation: never moves it
  acks.settled("s1", "settled"); // its result was stored: the ack has nothing left to record
  await acks.flush();
  const delivery = Object.fromEntries(
    (await db("operations").select("id", "delivery")).map((r) => [r.id, r.delivery]),
  );
  t.deepEqual(delivery, { settled: "pending", pending: "acked", other: "pending" });
});
