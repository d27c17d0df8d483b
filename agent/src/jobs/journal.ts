// Append-only journal of the operations this agent has taken on, so an operation
// id is run at most once, also across agent restarts. Two line kinds:
//   start <id>   written (and fsynced) before the job is acked and run
//   done <id>    written once its result is safely on disk (results/<id>.json)
// A `start` without `done` after a restart means the agent died while running it.
import { fdatasyncSync, writeSync } from "node:fs";
import { type FileHandle, open, readFile } from "node:fs/promises";

export class Journal {
  readonly #started = new Set<string>();
  readonly #done = new Set<string>();
  #tail: Promise<void> = Promise.resolve();

  private constructor(readonly file: FileHandle) {}

  static async open(path: string): Promise<Journal> {
    const bytes = await readFile(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return Buffer.alloc(0);
      throw err;
    });
    const journal = new Journal(await open(path, "a", 0o600));
    const complete = bytes.lastIndexOf(0x0a) + 1;
    for (const line of bytes.toString("utf8", 0, complete).split("\n")) journal.#apply(line);
    // A crash during an append can leave a torn last record. Its job was never
    // acked (the ack waits for the fsync), so nothing ran: cut it off.
    if (complete < bytes.length) {
      await journal.file.truncate(complete);
      await journal.file.datasync();
    }
    return journal;
  }

  /** Whether the id was ever taken on. True from the moment `start` is called. */
  has(operationId: string): boolean {
    return this.#started.has(operationId);
  }

  /** Ids started and never finished (the agent stopped while they ran). */
  unfinished(): string[] {
    return [...this.#started].filter((id) => !this.#done.has(id));
  }

  /**
   * Claims the id (has() turns true) and puts the claim on disk before returning.
   * Synchronous on purpose: one small append + fdatasync costs ~0.3 ms here, less
   * than the thread-pool round trips of the async API on every command's path.
   */
  start(operationId: string): void {
    this.#started.add(operationId);
    const fd = (this.file as unknown as { fd: number }).fd;
    // O_APPEND writes of one short line are atomic, so this cannot tear a record
    // of the async appends queued on #tail.
    writeSync(fd, `start ${operationId}\n`);
    fdatasyncSync(fd);
  }

  /** Forgets a claim whose write failed, so a redelivery can try again. */
  forget(operationId: string): void {
    this.#started.delete(operationId);
  }

  done(operationId: string): Promise<void> {
    this.#done.add(operationId);
    return this.#append(`done ${operationId}\n`);
  }

  close(): Promise<void> {
    return this.#tail.then(() => this.file.close());
  }

  #apply(line: string): void {
    const [kind, id] = line.split(" ");
    if (!id) return;
    if (kind === "start") this.#started.add(id);
    else if (kind === "done") this.#done.add(id);
  }

  /** Appends are chained so records never interleave; each is fsynced before it resolves. */
  #append(record: string): Promise<void> {
    const write = this.#tail.then(async () => {
      await this.file.appendFile(record);
      await this.file.datasync();
    });
    this.#tail = write.catch(() => {});
    return write;
  }
}
