import test from "ava";
import { describeOperation } from "./describe-operation.js";
import { shellWord } from "./join-tokens.js";

test("describe - an exec is its command; other types a short line; unknown ones their type", (t) => {
  t.is(describeOperation("exec", { command: "make deploy" }), "make deploy");
  t.is(describeOperation("deploy", { application_name: "shop", commit_ref: "main" }), "deploy shop @ main");
  t.is(describeOperation("restart", { container_name: "web" }), "restart web");
  t.is(describeOperation("reboot", { via: "hetzner" }), "reboot (via hetzner)");
  t.is(describeOperation("registry_login", { registry_url: "ghcr.io" }), "registry login ghcr.io");
  t.is(
    describeOperation("route_sync", { routes: [{}, {}], remove_application_ids: ["a"] }),
    "route sync: 2 routes, 1 removed",
  );
  t.is(describeOperation("exec", {}), "exec");
  t.is(describeOperation("something_new", { command: "x" }), "something_new");
});

test("join tokens - a base URL with shell characters is quoted in the commands", (t) => {
  t.is(shellWord("https://relay.example.com:8443"), "https://relay.example.com:8443");
  t.is(shellWord("http://a b'$(x)"), `'http://a b'\\''$(x)'`);
});
