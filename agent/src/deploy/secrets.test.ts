import test from "ava";
import { jobSecrets, urlPassword } from "./secrets.js";

test("deploy secrets - env values, the git and registry passwords, and a password inside the URL", (t) => {
  t.deepEqual(urlPassword("https://ci:p%40ss-word@git.example.test/app.git"), ["p%40ss-word", "p@ss-word"]);
  t.deepEqual(urlPassword("https://git.example.test/app.git"), []);
  t.deepEqual(urlPassword("git@github.com:acme/app.git"), []);
  t.deepEqual(urlPassword("/srv/repos/app"), []);
  const secrets = jobSecrets({
    deploymentId: "d",
    applicationId: "a",
    applicationName: "n",
    source: {
      repository: "https://u:url-secret@h.test/r.git",
      ref: "main",
      credential: { username: "u", password: "git-secret" },
      allowLocalSources: false,
    },
    build: {
      $case: "image",
      image: { image: "r.test/app:1", auth: { registry: "r.test", username: "u", password: "reg-secret" } },
    },
    containerPort: 80,
    healthCheckPath: "/",
    healthCheckTimeoutSeconds: 5,
    env: { A: "env-secret", EMPTY: "" },
    fqdns: [],
    containerBaseName: "n",
    deadlineUnixMs: 0,
    keepImages: [],
    limits: undefined,
  });
  t.deepEqual(secrets.sort(), ["env-secret", "git-secret", "reg-secret", "url-secret"]);
});
