// Waiting without fixed sleeps: poll a condition until it holds or a deadline passes. The
// polling itself is @relayctl/devkit's, shared with the benchmarks, make dev and unit tests.
export {
  type PollOptions,
  canConnect,
  pollUntil,
  waitForMinuteRoom,
  waitForTcp,
} from "@relayctl/devkit";
