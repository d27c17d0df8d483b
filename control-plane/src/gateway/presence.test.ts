import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { type Db, migrate, openDb } from "../db/knex.js";
import { PRESENCE_EVERY, Presence } from "./presence.js";

/** A migrated SQLite database with a tenant and the servers `ids`. */
async function dbWithServers(ids: string[]): Promise<Db> {
  const db = openDb(`sqlite://${join(mkdtempSync(join(tmpdir(), "relayctl-presence-")), "db.sqlite")}`);
  await migrate(db);
  await db("tenants").insert({ id: "t1", name: "t1", created_at: 0 });
  for (const id of ids) await db("servers").insert({ id, tenant_id: "t1", name: id, created_at: 0 });
  return db;
}

test("presence - the servers due within the flush delay are stored by one statement", async (t) => {
  const ids = Array.from({ length: 50 }, (_, i) => `s${i}`);
  const db = await dbWithServers(ids);
  t.teardown(() => db.destroy());
  const updates: string[] = [];
  db.on("query", (q: { sql: string }) => {
    if (/^update/i.test(q.sql)) updates.push(q.sql);
  });
  const interval = 5000;
  let clock = 1_000_000;
  const streams = ids.map((id) => new Presence(db, id, interval, () => clock, 50));
  clock += PRESENCE_EVERY * interval;
  // Due one after another, as spread heartbeats are, each awaited by its own stream.
  await Promise.all(streams.map((s) => s.heartbeat()));
  t.is(updates.length, 1);
  const seen = await db("servers").whereIn("id", ids).where("last_seen_at", ">", 0).count({ n: "*" });
  t.is(Number(seen[0]?.n), 50);
});

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
  const s1 = new Presence(db, "s1", interval, () => clock, 5);
  const s2 = new Presence(db, "s2", interval, () => clock, 5);
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

test("presence - a heartbeat that stores nothing makes no promise", async (t) => {
  const db = await dbWithServers(["s1"]);
  t.teardown(() => db.destroy());
  let clock = 1_000_000;
  const p = new Presence(db, "s1", 5000, () => clock, 5);
  clock += 5000;
  t.is(p.heartbeat(), undefined);
  clock += PRESENCE_EVERY * 5000;
  const stored = p.heartbeat();
  t.true(stored instanceof Promise);
  await stored;
});
