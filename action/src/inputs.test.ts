import test from "ava";
import { InputError, readInputs } from "./inputs.js";

const base: Record<string, string> = {
  api_key: "rca_abc",
  url: "https://relayctl.example.com/",
  compose_file: "compose.yml",
};
const read = (over: Record<string, string> = {}, env: Record<string, string> = {}) =>
  readInputs((name) => ({ ...base, ...over })[name] ?? "", env);

test("inputs - defaults and the runner's run id and commit", (t) => {
  const inputs = read({}, { GITHUB_RUN_ID: "42", GITHUB_SHA: "abc123" });
  t.is(inputs.url, "https://relayctl.example.com");
  t.is(inputs.force, false);
  t.is(inputs.composePort, "published");
  t.is(inputs.workflowRunId, "42");
  t.is(inputs.commitSha, "abc123");
  t.is(inputs.timeoutMs, 120_000);
  t.true(read({ force: "TRUE" }).force);
});

test("inputs - anything but an rca_ key fails fast", (t) => {
  t.throws(() => read({ api_key: "" }), { instanceOf: InputError, message: /'api_key' is required/ });
  t.throws(() => read({ api_key: "rck_x" }), { message: /must be an rca_ Automation key/ });
  t.throws(() => read({ api_key: "rds_x" }), { message: /must be an rca_ Automation key/ });
  t.throws(() => read({ api_key: "rk_t_x" }), { message: /retired Tenant Integration Key/ });
});

test("inputs - one service source, a URL and well-formed options", (t) => {
  t.throws(() => read({ services: "web:80" }), { message: /exclude each other/ });
  t.throws(() => read({ compose_file: "" }), { message: /give input 'compose_file'/ });
  t.deepEqual(read({ compose_file: "", services: "web:80\napi:81" }).services, ["web:80", "api:81"]);
  t.throws(() => read({ url: "" }), { message: /'url' is required/ });
  t.throws(() => read({ url: "relayctl" }), { message: /not a URL/ });
  t.throws(() => read({ url: "ftp://x" }), { message: /http\(s\) URL/ });
  t.throws(() => read({ force: "yes" }), { message: /'force' must be true or false/ });
  t.throws(() => read({ compose_port: "host" }), { message: /'published' or 'target'/ });
  t.throws(() => read({ timeout_seconds: "0" }), { message: /timeout_seconds/ });
});
