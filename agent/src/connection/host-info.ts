// What the agent tells the gateway about its machine in Hello.
import { readFileSync } from "node:fs";
import { hostname, uptime } from "node:os";

export const LINUX_BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id";

/**
 * Changes on every boot (the gateway detects a reboot by it); empty where the file
 * is missing. Read on every Hello: a reboot is seen on the first stream after it.
 */
export function bootId(file = LINUX_BOOT_ID_FILE): string {
  try {
    return readFileSync(file, "utf8").trim();
  } catch {
    return "";
  }
}

export function hostName(): string {
  return hostname();
}

/** When the machine booted (Unix ms): the server page shows its uptime from it. */
export function bootedAt(): number {
  return Math.round(Date.now() - uptime() * 1000);
}
