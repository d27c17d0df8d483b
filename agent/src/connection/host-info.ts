// What the agent tells the gateway about its machine in Hello.
import { readFileSync } from "node:fs";
import { hostname } from "node:os";

/** Changes on every boot (the gateway detects a reboot by it); empty where Linux's file is missing. */
export function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "";
  }
}

export function hostName(): string {
  return hostname();
}
