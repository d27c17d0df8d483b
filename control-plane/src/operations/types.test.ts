import test from "ava";
import { OPERATION_TYPES, UNTIMED_TYPES, describeOperation, typesInScope } from "./types.js";

test("operation types - describe: an exec is its command; other types a short line; unknown ones their type", (t) => {
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

test("operation types - a key's scope names its types; external_deploy runs route_sync; an empty scope allows all", (t) => {
  t.deepEqual(typesInScope(["exec", "external_deploy"]), ["exec", "route_sync"]);
  t.is(typesInScope([]).length, Object.keys(OPERATION_TYPES).length);
  t.deepEqual(UNTIMED_TYPES, ["reboot"]);
});
