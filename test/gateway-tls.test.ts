// The gateway speaks TLS when given a certificate, and refuses plaintext on a
// non-loopback address unless told otherwise.
import { spawn } from "node:child_process";
import { join } from "node:path";
import test from "ava";
import { Agent, enroll } from "./harness/agent";
import { assertCompleted } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { startControlPlane } from "./harness/control-plane";
import { exec } from "./harness/http";
import { SERVER_MAIN } from "./harness/programs";
import { selfSignedCert } from "./harness/tls";

test.after.always(cleanupAll);

test("gateway tls - an agent connects over grpcs:// with the CA file and runs a command", async (t) => {
  const dir = makeTempDir("tls");
  const tls = await selfSignedCert(dir);
  // Port 0: the gateway reports the port it bound, with the scheme TLS gives it, and the api
  // hands that URL to the agent at enrollment.
  const server = await startControlPlane({
    role: "all",
    bus: "memory",
    databaseUrl: `sqlite://${join(dir, "tls.db")}`,
    dir,
    env: {
      RELAYCTL_TLS_CERT_FILE: tls.cert,
      RELAYCTL_TLS_KEY_FILE: tls.key,
    },
  });
  t.teardown(() => server.stop());
  t.regex(server.gatewayUrl, /^grpcs:\/\/127\.0\.0\.1:\d+$/);

  await server.admin(["create-tenant", "--name", "tls"]);
  const key = await server.admin(["create-automation-key", "--tenant", "tls", "--name", "ci"]);
  const token = await server.admin(["create-join-token", "--tenant", "tls", "--server-name", "secure"]);
  const stateDir = join(dir, "agent");
  const enrolled = await enroll(server.apiUrl, String(token.join_token), stateDir);
  const agent = await new Agent(stateDir, dir, { RELAYCTL_AGENT_CA_FILE: tls.cert }).start();
  t.teardown(() => agent.stop());

  const res = await exec(
    { baseUrl: server.apiUrl, key: String(key.key) },
    { server_id: enrolled.server_id, command: "echo over-tls", timeout_seconds: 30 },
  );
  assertCompleted(t, res, { exit_code: 0, stdout: "over-tls\n", stderr: "" });
});

test("gateway tls - plaintext on a non-loopback address stops the server with a clear line", async (t) => {
  const dir = makeTempDir("plain");
  const child = spawn(process.execPath, [SERVER_MAIN, "serve"], {
    env: {
      PATH: process.env.PATH,
      RELAYCTL_ROLE: "gateway",
      RELAYCTL_BUS: "nats",
      RELAYCTL_NATS_URL: "nats://127.0.0.1:1",
      RELAYCTL_DATABASE_URL: `sqlite://${join(dir, "x.db")}`,
      // Refused at config, before any bind: port 0 is enough.
      RELAYCTL_GATEWAY_LISTEN: "0.0.0.0:0",
    },
  });
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  t.not(code, 0);
  t.regex(output, /^relayctl-server: config: RELAYCTL_GATEWAY_LISTEN: plaintext on 0\.0\.0\.0 refused/m);
  t.is(code, 2);
});
