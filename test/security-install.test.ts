// Issue 30, finding 11: the join token's install command pipes a script into
// `sudo sh`. When relayctl's URL is plain http on an address that is not this
// machine, anyone on the way could change that script, so no command (and no
// token) is handed out: 409 saying to set an https public URL. Over https the
// command pins the key the agent bundles are signed with (install-agent-bundles.test.ts
// runs the installer against a tampered bundle and checksum).
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type Dash, signInDash } from "./harness/dashboard-session";
import { createOwner } from "./harness/people";

async function cluster(publicUrl: string): Promise<{ c: Cluster; dash: Dash }> {
  const c = await startCluster({ serverEnv: { RELAYCTL_PUBLIC_URL: publicUrl } });
  const dash = await signInDash(c.baseUrl, await createOwner(c.db.url, c.tenantId));
  return { c, dash };
}

test.after.always(cleanupAll);

test("join token - plain http off loopback gets no install command and no token", async (t) => {
  const { c, dash } = await cluster("http://relay.example.test");
  const name = `plain-${Math.random().toString(36).slice(2, 8)}`;
  const r = await dash.call("POST", "/api/servers/join-tokens", { name });
  t.is(r.status, 409, describe(r));
  t.regex(String(r.json.detail), /plain http .* set RELAYCTL_PUBLIC_URL to an https:\/\/ URL/);
  t.false(r.text.includes("rjt_"));
  const rows = await c.db.query("SELECT id FROM join_tokens WHERE server_name = ?", [name]);
  t.deepEqual(rows, [], "no join token was made");
});

test("join token - over https the install command pins the bundles' signing key", async (t) => {
  const { c, dash } = await cluster("https://relay.example.test");
  const r = await dash.call("POST", "/api/servers/join-tokens", {});
  t.is(r.status, 201, describe(r));
  const latest = await dash.call("GET", "/agent/latest");
  const command = String(r.json.install_command);
  t.true(
    command.startsWith(
      `curl -fsSL https://relay.example.test/install.sh | sudo sh -s -- --token ${r.json.token} `,
    ),
    command,
  );
  const key = /--signing-key (\S+)$/.exec(command)?.[1];
  t.regex(key ?? "", /^MCowBQYDK2VwAyEA[A-Za-z0-9+/]{43}=$/);
  // The same key /agent/latest names, when bundles are built (503 when not: the key is still the one).
  if (latest.status === 200) t.is(latest.json.signing_key, key);
  t.truthy(c);
});
