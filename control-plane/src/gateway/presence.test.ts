import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { migrate, openDb } from "../db/knex.js";
import { PRESENCE_EVERY, Presence } from "./presence.js";

test("presence - a heartbeat is stored at most every PRESENCE_EVERY intervals per stream, each server its own", async (t) => {
  const db = openDb(`sqlite://${join(mkdtempSync(join(tmpdir(), "relayctl-presence-")), "db.sqlite")}`);
  t.teardown(() => db.destroy());
  await migrate(db);
  await db("tenants").insert({ id: "t1", name: "t1", created_at: 0 });
  for (const id of ["s1", "s2"]) await db("servers").insert({ id, tenant_id: "t1", name: id, created_at: 0 });
  // Every write of last_seen_at counted, per server, by the database itself.
  await db.raw("CREATE TABLE presence_writes (server_id TEXT)");
  await db.raw(
    "CREATE TRIGGER count_presence AFTER UPDATE OF last_seen_at ON servers BEGIN INSERT INTO presence_writes VALUES (NEW.id); END",
  );
  const writes = async (id: string) =>
    Number((await db("presence_writes").where({ server_id: id }).count({ n: "*" }))[0].n);

  const interval = 5000;
  let clock = 1_000_000;
  const s1 = new Presence(db, "s1", interval, () => clock);
  const s2 = new Presence(db, "s2", interval, () => clock);
  // The heartbeats of the first PRESENCE_EVERY - 1 intervals after the connect write nothing.
  for (let i = 1; i < PRESENCE_EVERY; i++) {
    clock += interval;
    await s1.heartbeat();
  }
  t.is(await writes("s1"), 0);
  clock += interval;
  await s1.heartbeat();
  t.is(await writes("s1"), 1, "the sixth interval's heartbeat is stored");
  const stored = Number((await db("servers").where({ id: "s1" }).first("last_seen_at")).last_seen_at);
  t.true(stored > 0);
  // A heartbeat a little early (agents' timers drift) still counts as the next interval's.
  clock += PRESENCE_EVERY * interval - interval / 4;
  await s1.heartbeat();
  t.is(await writes("s1"), 2);
  clock += interval;
  await s1.heartbeat();
  t.is(await writes("s1"), 2);
  // s2 keeps its own pace: its first heartbeat this late is stored, once.
  await s2.heartbeat();
  await s2.heartbeat();
  t.is(await writes("s2"), 1);
});
