// Launchers started by a small shell instead of a fork of the agent.
//
// node-pty's spawn forks the agent's whole Node process in its main thread: the
// event loop stops for the fork (page tables of a 100+ MB process), and the agent
// then takes a copy-on-write fault for every page it writes until the child has
// exec'd. On a 2-core VM of our CI kind that is 5-9 ms of the loop and ~14 ms of
// CPU per launcher, paid after every run, while the next job is on its way.
//
// So the agent keeps one long-lived POSIX shell (the host) that starts launchers
// for it. Per launcher the agent only opens a pty pair (node-pty's native open:
// no fork) and writes one line to the host, which forks itself (a few hundred KB)
// and runs, on the pty's slave side:
//
//   setsid -w -c env --default-signal=INT,QUIT <shell> -c 'echo "$$"; . "$1"' relayctl <fifo>
//
// setsid makes the launcher a session leader with the pty as its controlling
// terminal (as forkpty does); env undoes the SIGINT/SIGQUIT ignore a shell gives
// its background jobs, so commands see default dispositions as under node-pty.
// The launcher prints its pid (its process group, which a deadline kills) and then
// blocks opening its FIFO, exactly like a launcher node-pty spawned. The host
// reports each launcher's exit status (`X <id> <status>`, 128+n for a signal, as
// node-pty's exit is read) on its stdout, since the launcher is not the agent's
// child and cannot be waited for here.
//
// If anything of this is missing on the machine (no setsid with -w/-c, an env
// without --default-signal, no shell), the first launcher fails before printing
// its pid: the host is then marked broken and the runner spawns with node-pty as
// before.
import { type ChildProcessByStdio, spawn } from "node:child_process";
import { closeSync, writeSync } from "node:fs";
import { homedir } from "node:os";
import type { Socket } from "node:net";
import type { Readable, Writable } from "node:stream";
import { ReadStream } from "node:tty";

/** What a run needs of the pty it was launched in: node-pty's IPty has it too. */
export interface LaunchedPty {
  readonly pid: number;
  onData(listener: (data: Buffer | string) => void): unknown;
  onExit(listener: (exit: { exitCode: number; signal?: number }) => void): unknown;
  write(data: string): void;
}

interface NativePty {
  open(cols: number, rows: number): { master: number; slave: number; pty: string };
}

// node-pty's own loader (@lydell/node-pty: the prebuilt pty.node of this platform's package, a
// CommonJS file without types): the same pty.node its spawn uses. open() is in the native module
// but not in node-pty's typings.
function loadNativePty(): NativePty | undefined {
  try {
    const loader = require("@lydell/node-pty/requireBinary.js") as {
      requireBinary(file: string): NativePty;
    };
    const native = loader.requireBinary("pty.node");
    return typeof native.open === "function" ? native : undefined;
  } catch {
    return undefined;
  }
}

const SETSID = "setsid";

/** How long after a launcher's exit its pty's remaining output is waited for. */
const DRAIN_AFTER_EXIT_MS = 100;

/** One launcher's pty, seen from the agent: the master side and what the host reports. */
export class HostPty implements LaunchedPty {
  #pid = 0;
  #master: ReadStream;
  #slave: number | undefined;
  #head = "";
  #dataListeners: ((data: Buffer) => void)[] = [];
  #exitListeners: ((exit: { exitCode: number; signal?: number }) => void)[] = [];
  #exit: { exitCode: number } | undefined;
  #ended = false;
  #closed = false;
  #onFail: (why: string) => void;

  constructor(
    readonly id: number,
    readonly fds: { master: number; slave: number; pty: string },
    onFail: (why: string) => void,
  ) {
    this.#slave = fds.slave;
    this.#onFail = onFail;
    this.#master = new ReadStream(fds.master);
    this.#master.on("data", (chunk: Buffer) => this.#onData(chunk));
    // EIO once every slave side is closed: the session is over.
    this.#master.on("error", () => this.#end());
    this.#master.on("end", () => this.#end());
  }

  get pid(): number {
    return this.#pid;
  }

  /** True once the launcher has printed its pid (it is then at, or on its way to, its FIFO). */
  get ready(): boolean {
    return this.#pid > 0 && !this.#exit;
  }

  onData(listener: (data: Buffer) => void): void {
    this.#dataListeners.push(listener);
  }

  onExit(listener: (exit: { exitCode: number; signal?: number }) => void): void {
    if (this.#exit && this.#ended) listener(this.#exit);
    else this.#exitListeners.push(listener);
  }

  write(data: string): void {
    // Once closed, the descriptor's number may already name another file.
    if (this.#closed) return;
    try {
      writeSync(this.fds.master, data);
    } catch {
      // the pty is gone: its exit is on its way
    }
  }

  /** The host's report of the launcher's exit status. */
  exited(exitCode: number): void {
    if (this.#exit) return;
    this.#exit = { exitCode };
    // Not ready and not killed (128+n): setsid, env or the shell refused to run it here.
    if (this.#pid === 0 && exitCode < 128)
      this.#onFail(`launcher exited ${exitCode} before it was ready: ${this.#head.trim()}`);
    // Output still in the pty is read first (a run that died before its end marker
    // reports what it printed), for at most DRAIN_AFTER_EXIT_MS.
    if (this.#ended) this.#fireExit();
    else setTimeout(() => this.#end(), DRAIN_AFTER_EXIT_MS).unref();
  }

  /** Closes the agent's side: a launcher still waiting gets SIGHUP (the pty is its controlling terminal). */
  destroy(): void {
    this.#closeSlave();
    this.#closed = true;
    this.#master.destroy();
  }

  #onData(chunk: Buffer): void {
    if (this.#pid === 0) {
      this.#head += chunk.toString("latin1");
      const line = /^(\d+)\r?\n/.exec(this.#head);
      // Anything else first (setsid or env refusing): the host's exit report follows.
      if (!line) return;
      this.#pid = Number(line[1]);
      // The launcher has the slave open now; the agent's copy would keep the pty
      // from hanging up when the launcher's session ends.
      this.#closeSlave();
      const rest = this.#head.slice(line[0].length);
      if (rest) this.#emit(Buffer.from(rest, "latin1"));
      return;
    }
    this.#emit(chunk);
  }

  #emit(chunk: Buffer): void {
    for (const l of this.#dataListeners) l(chunk);
  }

  #end(): void {
    if (!this.#ended) {
      this.#ended = true;
      this.#closeSlave();
      this.#closed = true;
      this.#master.destroy();
    }
    if (this.#exit) this.#fireExit();
  }

  #fireExit(): void {
    const listeners = this.#exitListeners;
    this.#exitListeners = [];
    for (const l of listeners) l(this.#exit!);
  }

  #closeSlave(): void {
    if (this.#slave === undefined) return;
    try {
      closeSync(this.#slave);
    } catch {
      // already closed
    }
    this.#slave = undefined;
  }
}

/** The long-lived shell that starts launchers; see the top of this file. */
export class LauncherHost {
  #proc: ChildProcessByStdio<Writable, Readable, null> | undefined;
  #native: NativePty | undefined;
  #broken: string | undefined;
  #seq = 0;
  #live = new Map<number, HostPty>();
  /** What the host runs besides launchers (mkfifo), by id: called with the exit status. */
  #pending = new Map<number, (status: number) => void>();
  #buffered = "";

  constructor(
    readonly shell: string,
    /** The launchers' environment (the agent's, TERM=dumb). */
    readonly env: Record<string, string>,
  ) {
    this.#native = loadNativePty();
    if (!this.#native) this.#broken = "node-pty has no native open()";
  }

  /** Why launchers are not started by the host (then node-pty spawns them), or undefined. */
  get broken(): string | undefined {
    return this.#broken;
  }

  /**
   * Starts a launcher waiting on `fifo`; it is `ready` once it has printed its pid.
   * Undefined when the host cannot (then spawn with node-pty).
   */
  start(fifo: string): HostPty | undefined {
    if (this.#broken) return undefined;
    const proc = this.#host();
    if (!proc) return undefined;
    let fds: { master: number; slave: number; pty: string };
    try {
      fds = this.#native!.open(200, 50);
    } catch (err) {
      this.#broken = `cannot open a pty: ${(err as Error).message}`;
      return undefined;
    }
    const id = ++this.#seq;
    const launcher = new HostPty(id, fds, (why) => {
      this.#broken ??= why;
    });
    this.#live.set(id, launcher);
    launcher.onExit(() => this.#live.delete(id));
    const line =
      `{ ${SETSID} -w -c env --default-signal=INT,QUIT ${quote(this.shell)} -c 'echo "$$"; . "$1"' relayctl ${quote(fifo)}` +
      ` <${quote(fds.pty)} >${quote(fds.pty)} 2>&1; echo "X ${id} $?"; } &\n`;
    proc.stdin.write(line);
    return launcher;
  }

  /**
   * Makes FIFOs (mode 0600) through the host: mkfifo(1) forked by a small shell
   * rather than by the agent. Rejects when the host cannot (then fork it here).
   */
  mkfifo(paths: string[]): Promise<void> {
    const proc = this.#broken ? undefined : this.#host();
    if (!proc) return Promise.reject(new Error(`launcher host: ${this.#broken ?? "not running"}`));
    const id = ++this.#seq;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, (status) =>
        status === 0 ? resolve() : reject(new Error(`mkfifo exited ${status}`)),
      );
      proc.stdin.write(`{ mkfifo -m 600 ${paths.map(quote).join(" ")}; echo "X ${id} $?"; } &\n`);
    });
  }

  /**
   * Stops the host. Launchers not yet given a run are hung up by their owner
   * (WarmLaunchers.close); runs in flight go on, and their exits are still
   * reported (the launchers' shells hold the host's stdout).
   */
  close(): void {
    this.#broken ??= "closed";
    for (const settle of this.#pending.values()) settle(-1);
    this.#pending.clear();
    this.#proc?.stdin.end();
    // Reports still come while something else keeps the process up (a run in flight: its pty),
    // but a launcher's shell left behind no longer can: the process may end without it.
    (this.#proc?.stdout as Socket | undefined)?.unref();
    this.#proc?.unref();
    this.#proc = undefined;
  }

  #host(): ChildProcessByStdio<Writable, Readable, null> | undefined {
    if (this.#proc) return this.#proc;
    let proc: ChildProcessByStdio<Writable, Readable, null>;
    try {
      // One line per launcher, run as it comes; the host exits when the agent closes its stdin.
      proc = spawn(this.shell, ["-c", 'while IFS= read -r line; do eval "$line"; done'], {
        stdio: ["pipe", "pipe", "ignore"],
        env: this.env,
        cwd: homedir(),
      });
    } catch (err) {
      this.#broken = `cannot start the launcher host: ${(err as Error).message}`;
      return undefined;
    }
    proc.on("error", (err) => {
      this.#broken ??= `launcher host: ${err.message}`;
    });
    proc.on("exit", () => {
      if (this.#proc === proc) this.#proc = undefined; // started again for the next launcher
      // A mkfifo the host had not started yet never reports: fail it (the pool makes them itself).
      for (const settle of this.#pending.values()) settle(-1);
      this.#pending.clear();
    });
    proc.stdin.on("error", () => {}); // a host gone: its exit says so
    proc.stdout.setEncoding("latin1");
    // Launchers started by a host that has gone still report here (they hold its stdout).
    proc.stdout.on("data", (text: string) => this.#reports(text));
    this.#proc = proc;
    return proc;
  }

  #reports(text: string): void {
    this.#buffered += text;
    let nl = this.#buffered.indexOf("\n");
    while (nl >= 0) {
      const m = /^X (\d+) (\d+)$/.exec(this.#buffered.slice(0, nl));
      this.#buffered = this.#buffered.slice(nl + 1);
      if (m) {
        const id = Number(m[1]);
        const status = Number(m[2]);
        this.#live.get(id)?.exited(status);
        this.#pending.get(id)?.(status);
        this.#pending.delete(id);
      }
      nl = this.#buffered.indexOf("\n");
    }
  }
}

function quote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}
