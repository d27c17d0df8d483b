import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { auditKeysFromEnv, resolveAuditKeys } from "./chain-key.js";

const key32 = (byte: number) => Buffer.alloc(32, byte);

test("audit key - RELAYCTL_AUDIT_HMAC_KEY wins over the master key", (t) => {
  const keys = resolveAuditKeys({
    databaseUrl: "mysql://root@127.0.0.1/x",
    auditHmacKey: key32(1).toString("base64"),
    masterKey: key32(2),
  });
  t.deepEqual(keys?.chain, key32(1));
  t.is(keys?.source, "RELAYCTL_AUDIT_HMAC_KEY");
  t.notDeepEqual(keys?.checkpoint, keys?.chain, "checkpoints are signed under a key of their own");
});

test("audit key - on MySQL it is derived from the master key, never the master key itself", (t) => {
  const a = resolveAuditKeys({ databaseUrl: "mysql://h/x", masterKey: key32(2) });
  const b = resolveAuditKeys({ databaseUrl: "mysql://h/x", masterKey: key32(3) });
  t.is(a?.source, "RELAYCTL_MASTER_KEY");
  t.is(a?.chain.length, 32);
  t.notDeepEqual(a?.chain, key32(2));
  t.notDeepEqual(a?.chain, b?.chain);
  t.deepEqual(resolveAuditKeys({ databaseUrl: "mysql://h/x", masterKey: key32(2) })?.chain, a?.chain);
});

test("audit key - without any key on MySQL there is none (callers fail closed)", (t) => {
  t.is(resolveAuditKeys({ databaseUrl: "mysql://h/x" }), undefined);
  t.is(auditKeysFromEnv("mysql://h/x", {}), undefined);
  t.throws(() => auditKeysFromEnv("mysql://h/x", { RELAYCTL_MASTER_KEY: "c2hvcnQ=" }), {
    message: /32 bytes/,
  });
});

test("audit key - on SQLite a key file beside the database is made once and reused", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-audit-key-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const url = `sqlite://${join(dir, "dev.db")}`;
  const first = resolveAuditKeys({ databaseUrl: url, masterKey: key32(2) });
  const file = join(dir, "dev.db.audit-key");
  t.true(existsSync(file));
  t.is(statSync(file).mode & 0o777, 0o600);
  t.is(first?.source, "sqlite key file");
  t.deepEqual(first?.chain, Buffer.from(readFileSync(file, "utf8").trim(), "base64"));
  // Another process (an admin command without the master key) gets the same key.
  t.deepEqual(auditKeysFromEnv(url, {})?.chain, first?.chain);
});
