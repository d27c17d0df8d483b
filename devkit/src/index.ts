// @relayctl/devkit: what the test harness, the benchmarks and `make dev` share. Dev tooling
// only; no relayctl program depends on it.
export * from "./process.js";
export * from "./proctree.js";
export * from "./wait.js";
export * from "./ports.js";
export * from "./run.js";
export * from "./log-format.js";
export * from "./traffic.js";
export * from "./servers.js";
