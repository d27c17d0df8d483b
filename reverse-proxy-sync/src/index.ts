// reverse-proxy-sync: desired routes → reverse-proxy configuration, with a route
// ledger and a read-back of the live proxy to detect drift.
export * from "./route.js";
export * from "./route-writer.js";
export * from "./caddy-admin.js";
export * from "./caddy-writer.js";
export * from "./nginx-writer.js";
export * from "./traefik-writer.js";
export * from "./ledger.js";
export * from "./route-syncer.js";
export { renderedProblem } from "./writer-support.js";
export { fsyncDir, removeFileDurable, writeFileAtomic } from "./atomic-file.js";
