// Key secrets are shown once, at creation, and then appear nowhere: not in the
// database (hashes aside), the audit trail, the logs, or any later API answer.
// Also: a key scoped to some registry credentials cannot log in with another.
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ApiResponse, type RequestOptions, api, exec, request } from "./harness/http";

test.after.always(cleanupAll);

let c: Cluster;
const answers: string[] = [];
let apiKey: string;

test.before(async () => {
  c = await startCluster();
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ops"])).key);
});

async function manage(path: string, opts: RequestOptions): Promise<ApiResponse> {
  const res = await request(c, path, { ...opts, key: null, headers: { "x-api-key": apiKey } });
  answers.push(res.text);
  return res;
}

test.serial("secrets - automation and API key secrets appear only in their creation answer", async (t) => {
  const created = await manage("/api/automation-keys", { method: "POST", body: { name: "planted" } });
  t.is(created.status, 201, describe(created));
  const automationKey = String(created.json.key);
  t.regex(automationKey, /^rca_/);
  answers.length = 0; // the creation answer is the one place the secret may appear

  // Use both keys the way clients do, collecting every later answer.
  const ran = await exec(
    c,
    { server_id: c.serverId, command: "echo used", timeout_seconds: 30 },
    automationKey,
  );
  answers.push(ran.text);
  t.is(ran.status, 200, describe(ran));
  answers.push((await api(c, `/operations/${ran.json.operation_id}`, { key: automationKey })).text);
  await manage("/api/automation-keys", { method: "GET" });
  await manage("/api/audit?limit=1000", { method: "GET" });
  await manage(`/api/automation-keys/${created.json.id}`, { method: "DELETE" });
  const refused = await exec(c, { server_id: c.serverId, command: "echo no" }, automationKey);
  answers.push(refused.text);
  t.is(refused.status, 401, describe(refused));

  const dump = await c.db.dumpText();
  const logs = c.logText();
  for (const secret of [automationKey, apiKey, c.key]) {
    t.false(dump.includes(secret), "a key secret is in the database");
    t.false(logs.includes(secret), "a key secret is in a log");
    for (const a of answers) t.false(a.includes(secret), "a key secret is in a later API answer");
  }
  t.true(dump.includes(String(created.json.id)), "the key itself is stored (by id and hash)");
});

test.serial("registry login - a key scoped to other credentials is refused with 403", async (t) => {
  const mk = async (name: string) => {
    const res = await manage("/api/registry-credentials", {
      method: "POST",
      body: { name, registry_url: "registry.example.test", username: "u", password: `pw-${name}-planted` },
    });
    t.is(res.status, 201, describe(res));
    return String(res.json.id);
  };
  const allowed = await mk("allowed");
  const other = await mk("other");
  const scoped = await manage("/api/automation-keys", {
    method: "POST",
    body: { name: "scoped", allowed_credential_ids: [allowed] },
  });
  t.is(scoped.status, 201, describe(scoped));
  const res = await api(c, "/registry-auth/login", {
    method: "POST",
    key: String(scoped.json.key),
    body: { server_id: c.serverId, credential_id: other },
  });
  t.is(res.status, 403, describe(res));
  t.regex(String(res.json.detail), /credential/i);
  const ok = await api(c, "/registry-auth/login", {
    method: "POST",
    key: String(scoped.json.key),
    body: { server_id: c.serverId, credential_id: allowed },
  });
  t.is(ok.status, 202, describe(ok));
});
