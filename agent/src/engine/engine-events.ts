// The engine's container events as the container view (container-view.ts) reads
// them: docker's `GET /events` and podman's compatible one on the same API socket
// print one JSON object per line, `{"Type":"container","Action":"start","Actor":
// {"ID":<full id>,"Attributes":{"name":...}},"timeNano":...}`. The same endpoint
// answers both the live stream and the catch-up ("every event since T, then
// stop"), which the engines ask for differently:
// - podman (4.3) reads its events log and stops at EOF with `stream=false`; its
//   `until` is a wall-clock deadline for that read, not a filter (an `until` in
//   the past answers with whatever was read before the deadline fired: 0 or 1
//   events in a try here), so it is never sent to podman.
// - docker has no `stream` parameter: `until` ends the answer, and an `until`
//   still in the future is waited for, so it is the agent's now (same host clock).
import type { ListFlavour } from "./engine-api.js";

export interface ContainerEvent {
  id: string;
  action: string;
  /** The engine's time of the event (ns since the epoch). */
  timeNano: bigint;
  /** What tells a repeat apart: the live stream and a catch-up may both carry one event. */
  key: string;
  /** The container's name as the event tells it, when it does. */
  name?: string;
}

/**
 * Actions after which a container's name, state and ports are what they were:
 * nothing to ask. Every other action (start, die, rename, remove, and any the
 * engines add later) makes the view ask again about that one container.
 */
export const UNCHANGING_ACTIONS: ReadonlySet<string> = new Set([
  "attach",
  "detach",
  "commit",
  "copy",
  "archive-path",
  "extract-to-dir",
  "export",
  "top",
  "resize",
  "mount",
  "unmount",
  "health_status",
  "exec",
  "exec_create",
  "exec_start",
  "exec_die",
  "exec_died",
]);

const CONTAINER_FILTER = encodeURIComponent(JSON.stringify({ type: ["container"] }));

/** The live stream of container events. */
export const EVENTS_STREAM_PATH = `/events?filters=${CONTAINER_FILTER}`;

/** ns → the engines' "<seconds>.<nanoseconds>" timestamp. */
export function engineTime(nanos: bigint): string {
  const ns = nanos < 0n ? 0n : nanos;
  return `${ns / 1_000_000_000n}.${String(ns % 1_000_000_000n).padStart(9, "0")}`;
}

/** The catch-up: every container event from `sinceNano` until now, then the answer ends. */
export function catchUpPath(flavour: ListFlavour, sinceNano: bigint, nowMs: number): string {
  const since = `since=${engineTime(sinceNano)}`;
  if (flavour === "libpod") return `/events?stream=false&${since}&filters=${CONTAINER_FILTER}`;
  return `/events?${since}&until=${engineTime(BigInt(nowMs) * 1_000_000n)}&filters=${CONTAINER_FILTER}`;
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => (v !== null && typeof v === "object" ? (v as Json) : {});

/** One line of the events answer; undefined for anything but a container event with an id. */
export function parseEvent(line: string): ContainerEvent | undefined {
  let doc: Json;
  try {
    doc = obj(JSON.parse(line));
  } catch {
    return undefined;
  }
  const type = doc.Type ?? doc.type;
  const id = obj(doc.Actor).ID ?? doc.id;
  const action = doc.Action ?? doc.status;
  if (type !== "container" || typeof id !== "string" || id === "" || typeof action !== "string") {
    return undefined;
  }
  let timeNano: bigint;
  try {
    // timeNano is past 2^53: read from the text, not the parsed number.
    const m = /"timeNano"\s*:\s*(\d+)/.exec(line);
    timeNano = m ? BigInt(m[1]!) : BigInt(Number(doc.time ?? 0)) * 1_000_000_000n;
  } catch {
    return undefined;
  }
  return containerEvent(id, action, timeNano, obj(obj(doc.Actor).Attributes).name);
}

/** An event as the view applies it, wherever it was read (the API's stream or podman's events file). */
export function containerEvent(id: string, action: string, timeNano: bigint, name: unknown): ContainerEvent {
  return {
    id,
    action,
    timeNano,
    key: `${timeNano} ${id} ${action}`,
    ...(typeof name === "string" ? { name } : {}),
  };
}

/** Splits a streamed body into lines, keeping a partial last line for the next chunk. */
export class LineSplitter {
  #rest = "";

  push(chunk: string): string[] {
    const parts = (this.#rest + chunk).split("\n");
    this.#rest = parts.pop() ?? "";
    return parts.filter((l) => l.trim() !== "");
  }
}
