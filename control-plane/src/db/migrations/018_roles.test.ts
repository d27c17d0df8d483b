// Migration 018: the old `member` could deploy, so members (and pending member
// invites) become deployers with no exec grant; owners stay owners. Run on the
// real schema (SQLite), down to the member era and up again.
import test from "ava";
import { migrate, openDb } from "../knex.js";
import * as m018 from "./018_roles.js";

test("018_roles - members and member invites become deployers without the exec grant; owners stay", async (t) => {
  const db = openDb("sqlite://:memory:");
  t.teardown(() => db.destroy());
  await migrate(db);
  await m018.down(db);
  await db("tenants").insert({ id: "t1", name: "acme", created_at: Date.now() });
  const user = (id: string, role: string) => ({
    id,
    tenant_id: "t1",
    email: `${id}@example.test`,
    role,
    password_hash: "x",
    disabled_at: null,
    created_at: Date.now(),
  });
  await db("users").insert([user("o", "owner"), user("m", "member")]);
  await db("user_invites").insert({
    id: "i",
    tenant_id: "t1",
    email: "new@example.test",
    role: "member",
    token_hash: "h",
    invited_by: "o",
    expires_at: Date.now() + 1000,
    created_at: Date.now(),
  });
  await m018.up(db);
  const users = await db("users").orderBy("id").select("id", "role", "can_exec");
  t.deepEqual(
    users.map((u) => ({ ...u, can_exec: Boolean(u.can_exec) })),
    [
      { id: "m", role: "deployer", can_exec: false },
      { id: "o", role: "owner", can_exec: false },
    ],
  );
  t.is((await db("user_invites").first("role")).role, "deployer");
});
