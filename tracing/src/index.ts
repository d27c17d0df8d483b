// Tracing's switch for one process (the agent or a control-plane role): `otlp` loads the
// OpenTelemetry SDK (sdk.ts) and registers it globally, `off` loads nothing. This module
// imports no OpenTelemetry code, so a process with tracing off holds only the no-op API
// that its own spans helpers import; the SDK is required here on start, never at the top.
// The spans themselves (which operations, which attributes) stay with each program.
import type { Sdk } from "./sdk.js";

let sdk: Sdk | undefined;

/** True once startTracing turned the SDK on in this process. */
export function tracingOn(): boolean {
  return sdk !== undefined;
}

/** `otlp`: loads and registers the SDK under `serviceName` (once); `off`: nothing at all. */
export function startTracing(mode: "off" | "otlp", serviceName: string, version: string): void {
  if (mode !== "otlp" || sdk) return;
  const { startSdk } = require("./sdk.js") as typeof import("./sdk.js");
  sdk = startSdk(serviceName, version);
}

/** A stop never waits on an unreachable collector longer than this. */
const SHUTDOWN_MS = 2000;

/** Exports the spans still batched (call before exit), for at most SHUTDOWN_MS. */
export async function stopTracing(): Promise<void> {
  if (!sdk) return;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, SHUTDOWN_MS);
  });
  await Promise.race([sdk.shutdown().catch(() => {}), late]);
  clearTimeout(timer);
  sdk = undefined;
}

/** OpenTelemetry packages in require.cache: the proof that "off" loaded no SDK. */
export function loadedOtelPackages(): string[] {
  const names = new Set<string>();
  for (const path of Object.keys(require.cache)) {
    const m = /[\\/]node_modules[\\/]@opentelemetry[\\/]([^\\/]+)/.exec(path);
    if (m) names.add(`@opentelemetry/${m[1]}`);
  }
  return [...names].sort();
}
