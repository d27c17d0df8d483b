// Results not yet acknowledged by the gateway, one file per operation
// (<state>/results/<operation_id>.json). A result the gateway did not ack soon
// after it was sent (dispatcher.ts, SPOOL_AFTER_MS) is written atomically (tmp +
// fsync + rename + fsync of the directory) and deleted on ResultAck, so a result
// survives stream drops and agent restarts.
import { mkdir, readFile, readdir, unlink } from "node:fs/promises";
import { join } from "node:path";
import { JobResult } from "@relayctl/proto";
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync";

export class ResultStore {
  constructor(readonly dir: string) {}

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    // A tmp file is a write that never reached its rename: the result is redone from the journal.
    for (const name of await readdir(this.dir)) if (name.endsWith(".tmp")) await unlink(join(this.dir, name));
  }

  async save(result: JobResult): Promise<void> {
    await writeFileAtomic(this.#path(result.operationId), JSON.stringify(JobResult.toJSON(result)), 0o600);
  }

  async load(operationId: string): Promise<JobResult | undefined> {
    try {
      return JobResult.fromJSON(JSON.parse(await readFile(this.#path(operationId), "utf8")));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
  }

  async list(): Promise<JobResult[]> {
    const names = (await readdir(this.dir)).filter((n) => n.endsWith(".json"));
    const results = await Promise.all(names.map((n) => this.load(n.slice(0, -".json".length))));
    return results.filter((r): r is JobResult => r !== undefined);
  }

  async remove(operationId: string): Promise<void> {
    await unlink(this.#path(operationId)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "ENOENT") throw err;
    });
  }

  #path(operationId: string): string {
    return join(this.dir, `${operationId}.json`);
  }
}
