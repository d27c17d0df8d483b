// The health check's probe schedule (the probes themselves run against real containers in
// test/deploy-*.test.ts): soon after the first try, then backing off to the steady interval.
import test from "ava";
import { parseInspect } from "../engine/container-facts.js";
import { nextProbeWait, stoppedHow } from "./health-check.js";

test("health check - probes again 25 ms after the first try, doubling to every 200 ms, never longer", (t) => {
  const waits: number[] = [];
  let wait: number | undefined;
  for (let i = 0; i < 8; i++) {
    wait = nextProbeWait(wait);
    waits.push(wait);
  }
  t.deepEqual(waits, [25, 50, 100, 200, 200, 200, 200, 200]);
  // Summed: an application that answers 1 s after its start is seen within 200 ms of it.
  t.is(
    waits.slice(0, 3).reduce((a, b) => a + b),
    175,
  );
});

test("health check - a container that ended reads as its exit, in podman's 'stopped' (cleanup not yet run) as in 'exited'", (t) => {
  // Podman's inspect of a container whose process exited with 3, before and after conmon's cleanup.
  const inspect = (status: string) =>
    JSON.stringify([
      { Name: "web", State: { Status: status, Running: false, ExitCode: 3 }, RestartCount: 0 },
    ]);
  const before = parseInspect(inspect("stopped")).get("web");
  const after = parseInspect(inspect("exited")).get("web");
  t.is(before?.exitCode, 3);
  t.is(stoppedHow(before!), "exited with code 3");
  t.is(stoppedHow(after!), "exited with code 3");
  t.is(stoppedHow({ ...after!, exitCode: undefined }), "exited");
  t.is(stoppedHow({ ...after!, status: "paused" }), "paused");
});
