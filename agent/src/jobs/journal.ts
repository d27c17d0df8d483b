// Append-only journal of the operations this agent has taken on, so an operation
// id is run at most once, also across agent restarts. Two line kinds:
//   start <id>   written (and fsynced) before the job is acked and run
//   done <id>    written once its result is safely on disk (results/<id>.json)
// A `start` without `done` after a restart means the agent died while running it.
import { type FileHandle, open, readFile } from "node:fs/promises";

export class Journal {
  readonly #started = new Set<string>();
  readonly #done = new Set<string>();
  #tail: Promise<void> = Promise.resolve();
  readonly #claiming = new Map<string, Promise<void>>();
  #queued: { record: string; resolve: () => void; reject: (err: unknown) => void }[] = [];
  /** Done records written with the next append (doneLater). */
  readonly #later: string[] = [];

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
   * Claims the id (has() turns true at once) and resolves once the claim is on
   * disk. Claims and done records that arrive while a write is in flight go out
   * together in the next one: one append and one fdatasync for all of them
   * (group commit), so concurrent jobs do not queue behind each other's fsync.
   */
  start(operationId: string): Promise<void> {
    this.#started.add(operationId);
    const claim = this.#append(`start ${operationId}\n`);
    this.#claiming.set(operationId, claim);
    const settle = () => this.#claiming.delete(operationId);
    claim.then(settle, settle);
    return claim;
  }

  /** Resolves once the id's claim is on disk (at once if it is not being written); rejects if that failed. */
  claimed(operationId: string): Promise<void> {
    return this.#claiming.get(operationId) ?? Promise.resolve();
  }

  /** Forgets a claim whose write failed, so a redelivery can try again. */
  forget(operationId: string): void {
    this.#started.delete(operationId);
  }

  done(operationId: string): Promise<void> {
    this.#done.add(operationId);
    return this.#append(`done ${operationId}\n`);
  }

  /**
   * A done record that needs no write of its own (its result is stored by the
   * gateway): it goes with the journal's next write, or at close.
   */
  doneLater(operationId: string): void {
    this.#done.add(operationId);
    this.#later.push(`done ${operationId}\n`);
  }

  async close(): Promise<void> {
    if (this.#later.length > 0) await this.#append("").catch(() => undefined);
    await this.#tail;
    await this.file.close();
  }

  #apply(line: string): void {
    const [kind, id] = line.split(" ");
    if (!id) return;
    if (kind === "start") this.#started.add(id);
    else if (kind === "done") this.#done.add(id);
  }

  /**
   * Records are written in order, never interleaved: one write in flight at a
   * time, and everything queued meanwhile goes in the next one; each record's
   * promise resolves once its write is fsynced.
   */
  #append(record: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#queued.push({ record, resolve, reject });
      if (this.#queued.length === 1) this.#tail = this.#tail.then(() => this.#flush());
    });
  }

  async #flush(): Promise<void> {
    const batch = this.#queued;
    this.#queued = [];
    const later = this.#later.splice(0);
    try {
      await this.file.appendFile(later.join("") + batch.map((b) => b.record).join(""));
      await this.file.datasync();
      for (const b of batch) b.resolve();
    } catch (err) {
      for (const b of batch) b.reject(err);
    }
  }
}
