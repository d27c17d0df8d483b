import { ContainerState } from "@relayctl/proto";
import test from "ava";
import { CRASH_LOOP_WINDOW_MS, CrashTracker } from "./crash-tracker.js";
import type { ContainerRuntime } from "./runtime.js";
import { liveContainers, parseRuntime } from "./runtime.js";

const APP = "6da6e6aa-5b25-4ac7-bd3d-4d7d8629ada4";

function c(over: Partial<ContainerRuntime>): ContainerRuntime {
  return {
    name: "shop-1a2b3c4d",
    applicationId: APP,
    status: "running",
    exitCode: 0,
    restartCount: 0,
    createdAt: 1000,
    startedAt: 2000,
    finishedAt: 0,
    restartPolicy: "unless-stopped",
    serverId: "",
    ...over,
  };
}

const look = (t: CrashTracker, x: ContainerRuntime, now: number) =>
  t.observe(new Map([[x.applicationId, x]]), now)[0]!;

test("crash tracker - a restart the engine made between two looks is a crash, dated by its exit", (t) => {
  const tracker = new CrashTracker();
  t.like(look(tracker, c({}), 10_000), { state: ContainerState.CONTAINER_STATE_RUNNING, lastCrashUnixMs: 0 });
  const after = look(tracker, c({ restartCount: 1, finishedAt: 11_000, startedAt: 11_500 }), 15_000);
  t.like(after, { state: ContainerState.CONTAINER_STATE_RUNNING, restartCount: 1, lastCrashUnixMs: 11_000 });
  t.is(after.exitCode, undefined, "no exit code while it runs");
});

test("crash tracker - 3 crashes within 5 minutes are a crash loop; it ends when they age out", (t) => {
  const tracker = new CrashTracker();
  look(tracker, c({}), 0);
  t.is(
    look(tracker, c({ restartCount: 2, finishedAt: 900 }), 1000).state,
    ContainerState.CONTAINER_STATE_RUNNING,
  );
  t.is(
    look(tracker, c({ restartCount: 3, finishedAt: 1900 }), 2000).state,
    ContainerState.CONTAINER_STATE_CRASH_LOOP,
  );
  const later = 2000 + CRASH_LOOP_WINDOW_MS;
  t.is(
    look(tracker, c({ restartCount: 3, finishedAt: 1900 }), later).state,
    ContainerState.CONTAINER_STATE_RUNNING,
  );
});

test("crash tracker - an exit not restarted is crashed, a stop's exit is stopped, a new deployment starts clean", (t) => {
  const tracker = new CrashTracker();
  look(tracker, c({}), 0);
  t.like(look(tracker, c({ status: "exited", exitCode: 3, finishedAt: 500 }), 1000), {
    state: ContainerState.CONTAINER_STATE_CRASHED,
    exitCode: 3,
    lastCrashUnixMs: 500,
  });
  t.like(
    look(tracker, c({ name: "shop-99999999", status: "exited", exitCode: 143, finishedAt: 600 }), 2000),
    {
      state: ContainerState.CONTAINER_STATE_STOPPED,
      exitCode: 143,
      lastCrashUnixMs: 0,
    },
  );
});

test("runtime - inspect output read for docker and podman; the running container stands for its application", (t) => {
  const inspect = JSON.stringify([
    {
      Name: "/shop-old",
      Created: "2026-11-27T15:00:00Z",
      RestartCount: 0,
      State: {
        Status: "exited",
        ExitCode: 143,
        StartedAt: "2026-11-27T15:00:01Z",
        FinishedAt: "2026-11-27T15:05:00Z",
      },
      Config: { Labels: { "relayctl.application": APP, "relayctl.server": "srv-1" } },
      HostConfig: { RestartPolicy: { Name: "unless-stopped" } },
    },
    {
      Name: "shop-new",
      Created: "2026-11-27T14:00:00Z",
      RestartCount: 2,
      State: {
        Status: "running",
        ExitCode: 0,
        StartedAt: "2026-11-27T15:06:00Z",
        FinishedAt: "0001-01-01T00:00:00Z",
      },
      Config: { Labels: { "relayctl.application": APP } },
      HostConfig: { RestartPolicy: { Name: "unless-stopped" } },
    },
    { Name: "other", State: {}, Config: { Labels: {} } },
  ]);
  const all = parseRuntime(inspect);
  t.deepEqual(
    all.map((x) => x.name),
    ["shop-old", "shop-new"],
  );
  t.is(all[0]!.serverId, "srv-1", "the server whose agent deployed it");
  t.is(all[1]!.serverId, "", "a container from before the label");
  t.is(all[1]!.finishedAt, 0);
  t.is(all[1]!.restartCount, 2);
  t.is(liveContainers(all).get(APP)!.name, "shop-new");
});

test("crash tracker - an exit seen before the engine restarted from it is one crash, not two", (t) => {
  const tracker = new CrashTracker();
  look(tracker, c({}), 0);
  // podman 4 shows a crashed container as "stopped" until its restart.
  t.like(look(tracker, c({ status: "stopped", exitCode: 3, finishedAt: 500 }), 1000), {
    state: ContainerState.CONTAINER_STATE_CRASHED,
  });
  look(tracker, c({ restartCount: 1, finishedAt: 500, startedAt: 1100 }), 2000);
  look(tracker, c({ restartCount: 2, finishedAt: 2500, startedAt: 2600 }), 3000);
  t.is(
    look(tracker, c({ restartCount: 2, finishedAt: 2500, startedAt: 2600 }), 4000).state,
    ContainerState.CONTAINER_STATE_RUNNING,
    "2 crashes: no loop yet",
  );
  t.is(
    look(tracker, c({ restartCount: 3, finishedAt: 4500, startedAt: 4600 }), 5000).state,
    ContainerState.CONTAINER_STATE_CRASH_LOOP,
  );
});

test("crash tracker - a start that set podman's count back to 0 is a new run: its restarts after it are crashes", (t) => {
  const tracker = new CrashTracker();
  look(tracker, c({}), 0);
  look(tracker, c({ restartCount: 4, finishedAt: 900 }), 1000);
  // Started again by hand (the count is 0), then two crashes before the next look.
  const after = look(tracker, c({ restartCount: 2, finishedAt: 20_000, startedAt: 20_100 }), 21_000);
  t.is(after.lastCrashUnixMs, 20_000, "the crashes after the start are counted, not lost to the lower count");
  t.is(after.state, ContainerState.CONTAINER_STATE_CRASH_LOOP, "4 + 2 crashes within the window");
  // Told of the agent's start, a count back at the last one's is a new run too.
  const told = new CrashTracker();
  look(told, c({ restartCount: 1, finishedAt: 100 }), 0);
  // A stop's grace that ended in an exit of its own (exit 3), then the agent's start and one crash.
  look(told, c({ status: "exited", exitCode: 3, restartCount: 1, finishedAt: 500 }), 1000);
  told.started(APP);
  t.like(look(told, c({ restartCount: 1, finishedAt: 30_000, startedAt: 30_100 }), 31_000), {
    lastCrashUnixMs: 30_000,
  });
});

test("crash tracker - the agent's starts after crashes (podman, no policy) are counted as restarts; three crashes are a loop", (t) => {
  const tracker = new CrashTracker();
  const run = (startedAt: number) => c({ restartPolicy: "", startedAt });
  const exit = (finishedAt: number) => c({ restartPolicy: "", status: "exited", exitCode: 1, finishedAt });
  look(tracker, run(100), 1000);
  t.like(look(tracker, exit(1500), 2000), { state: ContainerState.CONTAINER_STATE_CRASHED, restartCount: 0 });
  tracker.started(APP);
  t.like(look(tracker, run(2100), 2200), { state: ContainerState.CONTAINER_STATE_RUNNING, restartCount: 1 });
  look(tracker, exit(2500), 3000);
  tracker.started(APP);
  t.like(look(tracker, run(3100), 3200), { restartCount: 2, lastCrashUnixMs: 2500 });
  t.like(look(tracker, exit(3500), 4000), {
    state: ContainerState.CONTAINER_STATE_CRASH_LOOP,
    restartCount: 2,
  });
});

test("crash tracker - a SIGKILL's exit (137: the OOM killer, a kill -9) is a crash; SIGTERM's (143) a stop", (t) => {
  const tracker = new CrashTracker();
  look(tracker, c({}), 0);
  t.like(look(tracker, c({ status: "exited", exitCode: 137, finishedAt: 500 }), 1000), {
    state: ContainerState.CONTAINER_STATE_CRASHED,
    lastCrashUnixMs: 500,
  });
  const other = new CrashTracker();
  look(other, c({}), 0);
  t.like(look(other, c({ status: "exited", exitCode: 143, finishedAt: 500 }), 1000), {
    state: ContainerState.CONTAINER_STATE_STOPPED,
    lastCrashUnixMs: 0,
  });
});
