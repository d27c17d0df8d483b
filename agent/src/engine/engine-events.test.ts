import test from "ava";
import { LineSplitter, UNCHANGING_ACTIONS, catchUpPath, engineTime, parseEvent } from "./engine-events.js";

// As podman 4.3.1 streams them on its compatible /events (trimmed attributes).
const podmanRemove =
  '{"status":"remove","id":"599f92a5e42404cf","from":"localhost/h5-busybox:1","Type":"container","Action":"remove","Actor":{"ID":"599f92a5e42404cf","Attributes":{"name":"web"}},"scope":"local","time":1795901937,"timeNano":1795901937300124139}';
// Docker's shape: the same fields, the id also under Actor.ID.
const dockerStart =
  '{"status":"start","id":"abc123","from":"nginx","Type":"container","Action":"start","Actor":{"ID":"abc123","Attributes":{"name":"api"}},"scope":"local","time":1700000000,"timeNano":1700000000000000001}';

test("engine events - a container event: id, action and the exact time in ns", (t) => {
  t.deepEqual(parseEvent(podmanRemove), {
    id: "599f92a5e42404cf",
    action: "remove",
    timeNano: 1795901937300124139n,
    key: "1795901937300124139 599f92a5e42404cf remove",
    name: "web",
  });
  t.is(parseEvent(dockerStart)?.timeNano, 1700000000000000001n);
});

test("engine events - other types, lines without an id and junk are not container events", (t) => {
  t.is(parseEvent(podmanRemove.replace('"Type":"container"', '"Type":"image"')), undefined);
  t.is(parseEvent('{"Type":"container","Action":"start","Actor":{"ID":""}}'), undefined);
  t.is(parseEvent("not json"), undefined);
  t.is(parseEvent(""), undefined);
});

test("engine events - exec and health checks change nothing the view keeps; start, die, rename do", (t) => {
  for (const a of ["exec_start", "exec_died", "health_status", "attach"])
    t.true(UNCHANGING_ACTIONS.has(a), a);
  for (const a of ["create", "start", "die", "stop", "rename", "remove", "pause", "update"]) {
    t.false(UNCHANGING_ACTIONS.has(a), a);
  }
});

test("engine events - the catch-up: podman reads to the end of its log, docker up to now", (t) => {
  t.is(engineTime(1795901937000000005n), "1795901937.000000005");
  t.is(engineTime(-3n), "0.000000000");
  const filter = "filters=%7B%22type%22%3A%5B%22container%22%5D%7D";
  t.is(
    catchUpPath("libpod", 1795901937300124139n, 1795901938000),
    `/events?stream=false&since=1795901937.300124139&${filter}`,
  );
  // podman's `until` is a deadline for its read, not a filter: never sent to it.
  t.false(catchUpPath("libpod", 1n, 2).includes("until"));
  t.is(
    catchUpPath("docker", 1795901937300124139n, 1795901938001),
    `/events?since=1795901937.300124139&until=1795901938.001000000&${filter}`,
  );
});

test("engine events - a stream cut mid-line is read whole", (t) => {
  const lines = new LineSplitter();
  t.deepEqual(lines.push(`${podmanRemove}\n${dockerStart.slice(0, 40)}`), [podmanRemove]);
  t.deepEqual(lines.push(`${dockerStart.slice(40)}\n\n`), [dockerStart]);
  t.deepEqual(lines.push(""), []);
});
