import test from "ava";
import { parseEvent } from "./engine-events.js";
import { parseFileEvent, podmanEventsLogPath } from "./events-file.js";

// One event as podman 4.3.1 writes it in its events file, and as its compatible /events answers it.
const fileDied =
  '{"ID":"18c0bc3635eedbe9","Image":"localhost/b:1","Name":"web","Status":"died","Time":"2026-11-29T01:06:05.36250522Z","Type":"container","Attributes":{"containerExitCode":"0"}}';
const apiDie =
  '{"status":"die","id":"18c0bc3635eedbe9","Type":"container","Action":"die","Actor":{"ID":"18c0bc3635eedbe9","Attributes":{"name":"web"}},"time":1795914365,"timeNano":1795914365362505220}';

test("events file - a line is the same event as the API's (key: ns, id, action; and the name)", (t) => {
  const file = parseFileEvent(fileDied);
  t.deepEqual(file, parseEvent(apiDie));
  t.is(file?.key, "1795914365362505220 18c0bc3635eedbe9 die");
});

test("events file - a time with an offset and no fraction", (t) => {
  const line = fileDied.replace("2026-11-29T01:06:05.36250522Z", "2026-11-29T02:06:05+01:00");
  t.is(parseFileEvent(line)?.timeNano, 1795914365000000000n);
});

test("events file - other types, other shapes and a cut line are not container events", (t) => {
  t.is(
    parseFileEvent('{"Status":"refresh","Time":"2026-11-29T00:56:51.8Z","Type":"system","Attributes":null}'),
    undefined,
  );
  t.is(parseFileEvent(fileDied.slice(0, 60)), undefined);
  t.is(parseFileEvent(fileDied.replace(/"Time":"[^"]*"/, '"Time":"yesterday"')), undefined);
});

test("events file - the path: containers.conf's events_logfile_path, else tmp_dir's events/events.log", (t) => {
  const env = { CONTAINERS_CONF: "/nonexistent/containers.conf", XDG_RUNTIME_DIR: "/run/user/1000" };
  const expected =
    process.getuid?.() === 0
      ? "/run/libpod/events/events.log"
      : "/run/user/1000/libpod/tmp/events/events.log";
  t.is(podmanEventsLogPath(env), expected);
});
