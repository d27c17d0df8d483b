import test from "ava";
import {
  buildKey,
  builtImageTag,
  containerName,
  deployLabels,
  namingProblem,
  validImageReference,
} from "./naming.js";

const APP = "0b9f7a2e-1c3d-4e5f-8a9b-0c1d2e3f4a5b";
const DEP = "7d4e2a10-9f8b-4c6d-a1e2-b3c4d5e6f708";

test("deploy naming - container <base>-<deployment id first 8>, image relayctl/<app>:<sha12>-<key12>", (t) => {
  t.is(containerName("shop-web", DEP), "shop-web-7d4e2a10");
  const inputs = { applicationId: APP, commitSha: "0123456789abcdef0123", context: ".", engine: "podman" };
  const key = buildKey({ ...inputs, dockerfile: "Dockerfile" });
  t.is(builtImageTag(APP, inputs.commitSha, key), `relayctl/${APP}:0123456789ab-${key.slice(0, 12)}`);
  t.true(validImageReference(builtImageTag(APP, inputs.commitSha, key)));
  const alt = buildKey({ ...inputs, dockerfile: "Dockerfile.alt" });
  t.not(
    builtImageTag(APP, inputs.commitSha, alt),
    builtImageTag(APP, inputs.commitSha, key),
    "another build, another tag",
  );
  t.deepEqual(deployLabels(APP, DEP), { "relayctl.application": APP, "relayctl.deployment": DEP });
  t.deepEqual(deployLabels(APP, DEP, "srv-1"), {
    "relayctl.application": APP,
    "relayctl.deployment": DEP,
    "relayctl.server": "srv-1",
  });
});

test("deploy naming - base names and image references that could be flags are refused", (t) => {
  t.is(namingProblem("shop-web", DEP), undefined);
  t.regex(namingProblem("-rm", DEP) ?? "", /invalid container base name/);
  t.regex(namingProblem("a b", DEP) ?? "", /invalid container base name/);
  t.regex(namingProblem("web", "../x") ?? "", /invalid deployment id/);
  t.true(validImageReference("localhost:5000/team/app:1.2@sha256:abc"));
  t.false(validImageReference("--privileged"));
  t.false(validImageReference("app name"));
});
