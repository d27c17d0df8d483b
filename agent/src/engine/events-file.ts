// Podman's `file` events logger read by the agent itself, from where it last
// stopped: the container view's catch-up (container-view.ts) without podman's
// `GET /events?since=`, which reads the WHOLE log for every query (~15 µs a line:
// 55–76 ms at podman's 1 MB cap; bench/README.md, route-sync). Podman appends one
// JSON line per event, under its lock, before the CLI call that caused it returns,
// so a read from the last offset to the end holds every event a check must see.
//
// The file is trusted only once proven to be the log the engine's API reads (the
// caller compares its last event with an API catch-up), and only while it is the
// same file from the same place on: a new inode (podman's rotation writes a new
// file and renames it over), a size below the offset, or other bytes just before
// the offset (truncated and written again past it) make `read` answer undefined,
// and the caller falls back to the API's full catch-up and proves a file again.
import { open } from "node:fs/promises";
import { homedir } from "node:os";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type ContainerEvent, containerEvent } from "./engine-events.js";

/** Bytes before the offset kept to recognise the file at the next read: at least one whole event line. */
const MARK_BYTES = 512;
/** How much of the file's end an anchor reads to find its last event. */
const ANCHOR_BYTES = 64 * 1024;

/** Podman's file names an action as its own events do; the compatible API renames this one. */
const API_ACTION: Record<string, string> = { died: "die" };

/** RFC 3339 with nanoseconds (Go's RFC3339Nano) → ns since the epoch. */
function nanosOf(time: string): bigint | undefined {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(time);
  if (!m) return undefined;
  const ms = Date.parse(`${m[1]}${m[3]}`);
  if (Number.isNaN(ms)) return undefined;
  return BigInt(ms) * 1_000_000n + BigInt((m[2] ?? "").padEnd(9, "0"));
}

/** One line of podman's events file; undefined for anything but a container event (same key as the API's). */
export function parseFileEvent(line: string): ContainerEvent | undefined {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const { Type: type, ID: id, Status: status, Time: time, Name: name } = doc ?? {};
  if (type !== "container" || typeof id !== "string" || id === "" || typeof status !== "string")
    return undefined;
  const timeNano = typeof time === "string" ? nanosOf(time) : undefined;
  if (timeNano === undefined) return undefined;
  return containerEvent(id, API_ACTION[status] ?? status, timeNano, name);
}

/** The last `key = "value"` of containers.conf files, later files winning (as podman reads them). */
function confValue(files: string[], key: string): string | undefined {
  let value: string | undefined;
  const line = new RegExp(`^\\s*${key}\\s*=\\s*"([^"]*)"`, "m");
  for (const file of files) {
    try {
      const m = line.exec(readFileSync(file, "utf8"));
      if (m) value = m[1];
    } catch {
      // A missing file sets nothing.
    }
  }
  return value;
}

/**
 * Where podman writes its events log for this process's user: containers.conf's
 * events_logfile_path, else <tmp_dir>/events/events.log. A guess the view proves
 * before it trusts it (a podman service of another user or configuration is
 * simply not proven, and the API's catch-up stays).
 */
export function podmanEventsLogPath(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const root = process.getuid?.() === 0;
  const files = env.CONTAINERS_CONF
    ? [env.CONTAINERS_CONF]
    : [
        "/usr/share/containers/containers.conf",
        "/etc/containers/containers.conf",
        ...(root ? [] : [join(env.HOME ?? homedir(), ".config/containers/containers.conf")]),
      ];
  const path = confValue(files, "events_logfile_path");
  if (path) return path;
  const runtimeDir = env.XDG_RUNTIME_DIR;
  const tmpDir =
    confValue(files, "tmp_dir") ?? (root ? "/run/libpod" : runtimeDir && join(runtimeDir, "libpod/tmp"));
  return tmpDir ? join(tmpDir, "events/events.log") : undefined;
}

export class EventsFileTail {
  #ino = -1;
  #offset = 0;
  #mark = Buffer.alloc(0);

  constructor(readonly path: string) {}

  /**
   * Starts at the file's present end (after its last whole line) and returns the
   * last container event before it, for the caller's proof; undefined when there
   * is none in the file's last 64 KB.
   */
  async anchor(): Promise<ContainerEvent | undefined> {
    const fh = await open(this.path, "r");
    try {
      const { ino, size } = await fh.stat();
      const start = Math.max(0, size - ANCHOR_BYTES);
      const buf = Buffer.alloc(size - start);
      const { bytesRead } = await fh.read(buf, 0, buf.length, start);
      const end = buf.subarray(0, bytesRead).lastIndexOf(0x0a) + 1;
      this.#ino = ino;
      this.#offset = start + end;
      this.#mark = Buffer.from(buf.subarray(Math.max(0, end - MARK_BYTES), end));
      const lines = buf.toString("utf8", 0, end).split("\n");
      for (let i = lines.length - 1; i >= 0; i--) {
        const event = parseFileEvent(lines[i]!);
        if (event) return event;
      }
      return undefined;
    } finally {
      await fh.close();
    }
  }

  /** The container events appended since the anchor or the last read; undefined when the file is not the same one. */
  async read(): Promise<ContainerEvent[] | undefined> {
    const fh = await open(this.path, "r");
    try {
      const { ino, size } = await fh.stat();
      if (ino !== this.#ino || size < this.#offset) return undefined;
      const from = this.#offset - this.#mark.length;
      const buf = Buffer.alloc(size - from);
      const { bytesRead } = await fh.read(buf, 0, buf.length, from);
      const got = buf.subarray(0, bytesRead);
      if (!got.subarray(0, this.#mark.length).equals(this.#mark)) return undefined;
      // A line still being written belongs to a call that has not returned: read it next time.
      const end = got.lastIndexOf(0x0a) + 1;
      if (end <= this.#mark.length) return [];
      const fresh = got.toString("utf8", this.#mark.length, end);
      this.#offset = from + end;
      this.#mark = Buffer.from(got.subarray(Math.max(0, end - MARK_BYTES), end));
      return fresh.split("\n").flatMap((l) => parseFileEvent(l) ?? []);
    } finally {
      await fh.close();
    }
  }
}
