// The images relayctl built, by application and build key, in <stateDir>/images.json
// (issue 34, goal 4). Built images carry no labels: podman 4.3 turns each `--label` of
// a build into a LABEL step of its own, so the step before it is committed as one more
// image (measured: 70–300 ms a build here). What the labels told is kept here instead:
// which application an image is for (retention and the cleanup of a deleted
// application find it by its id, beside its tag relayctl/<application id>:...), and the
// build key and deployment that built it (a redeploy of the same commit and build runs
// it as it is). An entry says what was built, never that it still exists: a reader
// asks the engine for the image (removed by hand, it is simply built again).
//
// Written whole and atomically (write, fsync, rename), one write at a time, each
// holding every change made before it. The write is off the deployment's path: an
// agent that stops before it only loses the chance to reuse that image (built again
// later) and its untagged form to retention (a tagged image is found by its tag).
import { readFile } from "node:fs/promises";
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync";

export interface BuiltEntry {
  applicationId: string;
  /** naming.ts buildKey(): what the image was built from. */
  buildKey: string;
  /** The tag the build gave it (naming.ts builtImageTag). */
  tag: string;
  /** `sha256:<hex>`. */
  imageId: string;
  deploymentId: string;
  builtAtMs: number;
  /**
   * When a deployment last ran it (built, reused or rolled back to): the order of an
   * application's images, which the engine's creation times no longer give (an image of
   * files built before, by any application, keeps its first creation time).
   */
  usedAtMs: number;
}

const VERSION = 1;

function validEntry(e: unknown): e is BuiltEntry {
  const o = e as Record<string, unknown> | null;
  return (
    typeof o === "object" &&
    o !== null &&
    ["applicationId", "buildKey", "tag", "imageId", "deploymentId"].every((k) => typeof o[k] === "string") &&
    typeof o.builtAtMs === "number" &&
    typeof o.usedAtMs === "number"
  );
}

export class ImageLedger {
  #entries: BuiltEntry[];
  #writing: Promise<void> = Promise.resolve();
  #failure: Error | undefined;

  private constructor(
    readonly file: string,
    entries: BuiltEntry[],
  ) {
    this.#entries = entries;
  }

  /** Reads the ledger; a missing or unreadable file is an empty one (images are then found by tag). */
  static async open(file: string): Promise<ImageLedger> {
    let entries: BuiltEntry[] = [];
    try {
      const parsed = JSON.parse(await readFile(file, "utf8")) as { version?: unknown; images?: unknown };
      if (parsed.version === VERSION && Array.isArray(parsed.images))
        entries = parsed.images.filter(validEntry);
    } catch {}
    return new ImageLedger(file, entries);
  }

  /** The image built for this key, as recorded (the caller checks the engine still has it). */
  built(applicationId: string, buildKey: string): BuiltEntry | undefined {
    return this.#entries.find((e) => e.applicationId === applicationId && e.buildKey === buildKey);
  }

  ofApplication(applicationId: string): BuiltEntry[] {
    return this.#entries.filter((e) => e.applicationId === applicationId);
  }

  /** Records a build; an entry of the same key, or of the same tag (it moved), is replaced. */
  record(entry: BuiltEntry): Promise<void> {
    this.#entries = this.#entries.filter(
      (e) =>
        !(e.applicationId === entry.applicationId && (e.buildKey === entry.buildKey || e.tag === entry.tag)),
    );
    this.#entries.push(entry);
    return this.#save();
  }

  /** A deployment runs this image now (a reuse or a rollback): it is the application's newest. */
  used(applicationId: string, imageId: string, atMs = Date.now()): Promise<void> {
    let changed = false;
    for (const e of this.#entries)
      if (e.applicationId === applicationId && e.imageId === imageId && e.usedAtMs < atMs) {
        e.usedAtMs = atMs;
        changed = true;
      }
    return changed ? this.#save() : this.#writing;
  }

  /** Drops the application's entries whose image is not in `present` (every entry when undefined). */
  forget(applicationId: string, present?: ReadonlySet<string>): Promise<void> {
    const before = this.#entries.length;
    this.#entries = this.#entries.filter(
      (e) => e.applicationId !== applicationId || present?.has(e.imageId) === true,
    );
    return this.#entries.length === before ? this.#writing : this.#save();
  }

  /** Resolves when every change so far is on disk; rejects with the last write's failure. */
  async flushed(): Promise<void> {
    await this.#writing;
    if (this.#failure) throw this.#failure;
  }

  #save(): Promise<void> {
    // Each write takes the entries as they are when it runs: a burst of changes ends in one write.
    this.#writing = this.#writing.then(async () => {
      const images = this.#entries;
      try {
        await writeFileAtomic(this.file, `${JSON.stringify({ version: VERSION, images }, null, 1)}\n`, 0o600);
        this.#failure = undefined;
      } catch (err) {
        this.#failure = err as Error;
      }
    });
    return this.#writing;
  }
}
