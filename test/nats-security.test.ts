// Jobs carry env values and registry passwords across NATS: the control plane
// authenticates to NATS and speaks TLS to it when configured, and the gateway
// describes its protocol (gRPC reflection) only when the operator asks.
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import test from "ava";
import { Agent, enroll } from "./harness/agent";
import { assertCompleted } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { startControlPlane } from "./harness/control-plane";
import { exec } from "./harness/http";
import { launchNats } from "./harness/nats";
import { selfSignedCert } from "./harness/tls";

test.after.always(cleanupAll);

const NATS_PASSWORD = "nats-s3cret-password";

/** nats-server with a password and TLS, on a port it picks itself (-p -1) and logs. */
async function secureNats(dir: string, tls: { cert: string; key: string }) {
  const { proc, port } = await launchNats(
    "nats-secure",
    -1,
    ["--user", "relayctl", "--pass", NATS_PASSWORD, "--tls", "--tlscert", tls.cert, "--tlskey", tls.key],
    join(dir, "nats.log"),
  );
  return { url: `tls://127.0.0.1:${port}`, stop: () => proc.stop("SIGTERM") };
}

test("nats security - the roles reach each other over an authenticated TLS NATS and an exec completes", async (t) => {
  const dir = makeTempDir("nats-tls");
  const tls = await selfSignedCert(dir);
  const nats = await secureNats(dir, tls);
  t.teardown(() => nats.stop());
  const server = await startControlPlane({
    role: "all",
    databaseUrl: `sqlite://${join(dir, "cp.db")}`,
    natsUrl: nats.url,
    dir,
    env: {
      RELAYCTL_NATS_USER: "relayctl",
      RELAYCTL_NATS_PASSWORD: NATS_PASSWORD,
      RELAYCTL_NATS_TLS_CA_FILE: tls.cert,
    },
  });
  t.teardown(() => server.stop());
  await server.admin(["create-tenant", "--name", "nats"]);
  const key = await server.admin(["create-automation-key", "--tenant", "nats", "--name", "ci"]);
  const token = await server.admin(["create-join-token", "--tenant", "nats", "--server-name", "web"]);
  const stateDir = join(dir, "agent");
  const enrolled = await enroll(server.apiUrl, String(token.join_token), stateDir);
  const agent = await new Agent(stateDir, dir).start();
  t.teardown(() => agent.stop());
  const res = await exec(
    { baseUrl: server.apiUrl, key: String(key.key) },
    { server_id: enrolled.server_id, command: "echo over-secure-nats", timeout_seconds: 30 },
  );
  assertCompleted(t, res, { exit_code: 0, stdout: "over-secure-nats\n", stderr: "" });
  t.false(server.logText().includes(NATS_PASSWORD), "the NATS password is never logged");
});

function reflectionClient(address: string) {
  const root = join(require.resolve("@grpc/reflection/package.json"), "..", "build", "proto");
  const def = loadSync(join(root, "grpc/reflection/v1alpha/reflection.proto"), { includeDirs: [root] });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    grpc: { reflection: { v1alpha: { ServerReflection: grpc.ServiceClientConstructor } } };
  };
  return new pkg.grpc.reflection.v1alpha.ServerReflection(address, grpc.credentials.createInsecure());
}

/** Asks the gateway to list its services: the names, or the gRPC status code it refused with. */
function listServices(address: string): Promise<string[] | grpc.status> {
  const client = reflectionClient(address);
  return new Promise((resolve, reject) => {
    const call = client.ServerReflectionInfo();
    call.on("data", (m: { listServicesResponse?: { service: { name: string }[] } }) => {
      resolve(m.listServicesResponse?.service.map((s) => s.name) ?? [JSON.stringify(m)]);
      call.end();
    });
    call.on("error", (err: grpc.ServiceError) => resolve(err.code));
    call.on("end", () => client.close());
    call.on("close", () => reject(new Error("reflection call closed without an answer")));
    call.write({ listServices: "" });
  });
}

for (const on of [false, true]) {
  test(`gateway reflection - ${on ? "served when RELAYCTL_GRPC_REFLECTION=true" : "off by default"}`, async (t) => {
    const dir = makeTempDir("reflection");
    const server = await startControlPlane({
      role: "all",
      bus: "memory",
      databaseUrl: `sqlite://${join(dir, "cp.db")}`,
      dir,
      env: on ? { RELAYCTL_GRPC_REFLECTION: "true" } : {},
    });
    t.teardown(() => server.stop());
    const answer = await listServices(new URL(server.gatewayUrl).host);
    if (on)
      t.true(
        Array.isArray(answer) && answer.includes("relayctl.agent.v1.AgentGateway"),
        JSON.stringify(answer),
      );
    else t.is(answer, grpc.status.UNIMPLEMENTED);
  });
}
