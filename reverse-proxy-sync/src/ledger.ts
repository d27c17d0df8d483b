// The agent's route ledger: what it applied to the proxy, for which
// application, with which signature. It is what tells drift (same signature,
// proxy changed behind our back) from a first sync, across agent restarts, so it
// lives in a file, replaced atomically. A corrupt file costs us only that
// distinction (every route is re-applied once), so it is set aside, not fatal.
import { mkdir, rename } from "node:fs/promises";
import { dirname } from "node:path";
import { writeFileAtomic } from "./atomic-file.js";
import { readIfExists } from "./writer-support.js";

export interface LedgerEntry {
  applicationId: string;
  signatureHash: string;
  /** Sorted, as applied. */
  fqdns: string[];
  upstream: string;
  containerName: string;
  containerPort: number;
  imageTag: string;
  /** Epoch milliseconds of the apply. */
  appliedAt: number;
  /** Marked draining on this server (its health path answers 503); absent is live. */
  draining?: boolean;
}

const VERSION = 1;

function isEntry(v: unknown): v is LedgerEntry {
  if (typeof v !== "object" || v === null) return false;
  const e = v as Record<string, unknown>;
  return (
    typeof e.applicationId === "string" &&
    typeof e.signatureHash === "string" &&
    Array.isArray(e.fqdns) &&
    e.fqdns.every((f) => typeof f === "string") &&
    typeof e.upstream === "string" &&
    typeof e.containerName === "string" &&
    typeof e.containerPort === "number" &&
    typeof e.imageTag === "string" &&
    typeof e.appliedAt === "number" &&
    (e.draining === undefined || typeof e.draining === "boolean")
  );
}

/** The entries of a ledger file, or undefined when it is not one. */
function parseLedger(text: string): LedgerEntry[] | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof doc !== "object" || doc === null) return undefined;
  const { version, routes } = doc as Record<string, unknown>;
  if (version !== VERSION || !Array.isArray(routes) || !routes.every(isEntry)) return undefined;
  return routes;
}

/** `<file>.corrupt-<epoch ms>`, with a counter when that name is taken (never overwrite evidence). */
async function asideName(file: string): Promise<string> {
  const base = `${file}.corrupt-${Date.now()}`;
  for (let n = 0; ; n++) {
    const name = n === 0 ? base : `${base}-${n}`;
    if ((await readIfExists(name)) === undefined) return name;
  }
}

function copy(entry: LedgerEntry): LedgerEntry {
  return { ...entry, fqdns: [...entry.fqdns] };
}

export class RouteLedger {
  readonly file: string;
  readonly #entries: Map<string, LedgerEntry>;

  private constructor(file: string, entries: LedgerEntry[]) {
    this.file = file;
    this.#entries = new Map(entries.map((e) => [e.applicationId, e]));
  }

  /**
   * Loads the ledger; a missing file is an empty ledger. A file that is not a
   * ledger is renamed to `<file>.corrupt-<epoch ms>` (kept for a post-mortem)
   * and the ledger starts empty.
   */
  static async open(file: string): Promise<RouteLedger> {
    const text = await readIfExists(file);
    if (text === undefined) return new RouteLedger(file, []);
    const entries = parseLedger(text);
    if (entries !== undefined) return new RouteLedger(file, entries);
    await rename(file, await asideName(file));
    return new RouteLedger(file, []);
  }

  get(applicationId: string): LedgerEntry | undefined {
    const entry = this.#entries.get(applicationId);
    return entry && copy(entry);
  }

  /** Application ids, sorted. */
  ids(): string[] {
    return [...this.#entries.keys()].sort();
  }

  set(entry: LedgerEntry): void {
    this.#entries.set(entry.applicationId, copy(entry));
  }

  delete(applicationId: string): void {
    this.#entries.delete(applicationId);
  }

  /** Writes the ledger atomically (temp file, fsync, rename, fsync dir), readable by its owner only. */
  async save(): Promise<void> {
    await mkdir(dirname(this.file), { recursive: true, mode: 0o700 });
    const routes = this.ids().map((id) => this.#entries.get(id)!);
    await writeFileAtomic(this.file, `${JSON.stringify({ version: VERSION, routes }, null, 2)}\n`, 0o600);
  }
}
