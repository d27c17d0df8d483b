// stderr of a run goes to a named pipe, so it stays apart from stdout even though
// the command runs in a pty. Two properties make it lossless without sleeps:
// - We open the FIFO O_RDWR|O_NONBLOCK before the spawn. On Linux that never
//   blocks, the shell's `2>fifo` open then succeeds at once, and because we hold a
//   write end ourselves the read side never sees a premature EOF, whatever the
//   command's processes do with their copies.
// - To finish, we write a per-run sentinel into the FIFO and read until it comes
//   back. A FIFO is ordered, so everything written before the command exited
//   (before its end marker reached stdout) has been read by then.
// mkfifo(3) is not in Node's API and spawning mkfifo(1) costs ~3 ms, more than the
// pty spawn itself, so FifoPool makes FIFOs in batches ahead of need, topped up
// while a command runs (the fork of mkfifo blocks the event loop briefly; the
// runner hands the pool its launcher host, which forks mkfifo instead).
import { execFile } from "node:child_process";
import { constants, openSync } from "node:fs";
import { mkdir, mkdtemp, rm, unlink } from "node:fs/promises";
import { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { MarkerScanner, StreamCapture } from "./output-capture.js";
import type { Scrubber } from "./scrubber.js";

const execFileAsync = promisify(execFile);

/** Fresh FIFOs (each used by one run) in a private 0700 directory. */
export class FifoPool {
  #dir: Promise<string> | undefined;
  #ready: string[] = [];
  #filling: Promise<void> | undefined;
  #seq = 0;

  constructor(
    /**
     * Directory for the FIFOs, owned by this pool: emptied on first use, so FIFOs
     * left by a crashed agent do not pile up. Default: a fresh temp directory.
     */
    readonly fixedDir?: string,
    /** Refill when fewer than this many are ready. */
    readonly lowWater = 8,
    /** FIFOs made per mkfifo(1) call. */
    readonly batch = 32,
    /** Makes the FIFOs (mode 0600) at `paths`; default mkfifo(1) spawned by the agent. */
    readonly maker: (paths: string[]) => Promise<void> = spawnMkfifo,
  ) {}

  /** A path to a FIFO nobody else has; the caller unlinks it. */
  async take(): Promise<string> {
    while (this.#ready.length === 0) await this.#fill();
    return this.#ready.pop()!;
  }

  /** Tops the pool up in the background if it runs low. Call when the event loop is about to wait anyway. */
  refill(): void {
    if (this.#ready.length < this.lowWater) this.#fill().catch(() => {}); // a failure resurfaces in take()
  }

  async #makeDir(): Promise<string> {
    if (!this.fixedDir) return mkdtemp(join(tmpdir(), "relayctl-agent-fifo-")); // mkdtemp makes it 0700
    await rm(this.fixedDir, { recursive: true, force: true });
    await mkdir(this.fixedDir, { recursive: true, mode: 0o700 });
    return this.fixedDir;
  }

  async close(): Promise<void> {
    await this.#filling?.catch(() => {});
    const dir = this.#dir;
    this.#dir = undefined;
    this.#ready = [];
    if (dir) await rm(await dir, { recursive: true, force: true });
  }

  #fill(): Promise<void> {
    this.#filling ??= this.#make().finally(() => {
      this.#filling = undefined;
    });
    return this.#filling;
  }

  async #make(): Promise<void> {
    this.#dir ??= this.#makeDir();
    const dir = await this.#dir.catch((err) => {
      this.#dir = undefined; // let the next take() try again
      throw err;
    });
    const paths = Array.from({ length: this.batch }, () => join(dir, `${++this.#seq}.fifo`));
    await this.maker(paths);
    this.#ready.push(...paths);
  }
}

export async function spawnMkfifo(paths: string[]): Promise<void> {
  await execFileAsync("mkfifo", ["-m", "600", ...paths]);
}

/** The read side of one run's stderr FIFO. */
export class StderrFifo {
  readonly #socket: Socket;
  readonly #capture: StreamCapture;
  readonly #sentinel: string;
  readonly #done: Promise<void>;
  #finishing: Promise<string> | undefined;

  /** Opens `path` (must be a FIFO); call before the command is spawned. */
  constructor(
    readonly path: string,
    capBytes: number,
    nonce: string,
    /** Removes the job's secrets (after the sentinel scan, so it cannot touch the sentinel). */
    scrubber?: Scrubber,
    /** The stderr text as it comes (RunRequest.onOutput). */
    onText?: (text: string) => void,
  ) {
    this.#sentinel = `\x1fRCERR-${nonce}\x1f`;
    const sentinel = new MarkerScanner(this.#sentinel, 0);
    this.#capture = new StreamCapture("stderr", capBytes, sentinel, false, scrubber, onText);
    const fd = openSync(path, constants.O_RDWR | constants.O_NONBLOCK);
    this.#socket = new Socket({ fd, readable: true, writable: true });
    this.#done = new Promise((resolve, reject) => {
      this.#socket.on("data", (chunk: Buffer) => {
        if (this.#capture.write(chunk)) resolve();
      });
      this.#socket.on("error", reject);
    });
    this.#done.catch(() => {}); // observed in #finish; this only keeps an early error from being "unhandled"
  }

  /** Call once the command has exited: drains the FIFO up to our sentinel, then closes it. */
  finish(): Promise<string> {
    this.#finishing ??= this.#finish();
    return this.#finishing;
  }

  /** Closes without draining (the run never started). */
  abandon(): void {
    this.#socket.destroy();
    unlink(this.path).catch(() => {});
  }

  async #finish(): Promise<string> {
    this.#socket.write(this.#sentinel);
    try {
      await this.#done;
      return this.#capture.text();
    } catch (err) {
      this.#capture.end();
      return `${this.#capture.text()}\n[relayctl: reading stderr failed: ${(err as Error).message}]\n`;
    } finally {
      this.abandon();
    }
  }
}
