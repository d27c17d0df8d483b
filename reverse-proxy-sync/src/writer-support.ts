// What every writer shares: the last check before a route reaches a proxy, and
// a journal of the files one apply replaced (through atomic-file.ts, so a crash
// leaves either the old file or the new one, and a proxy watching the directory
// never reads a partial file).
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { removeFileDurable, writeFileAtomic } from "./atomic-file.js";
import type { LiveRoute, RouteChange } from "./route-writer.js";
import { type RenderedRoute, validApplicationId, validFqdn, validPort } from "./route.js";
import { UUID_SHAPE } from "./uuid.js";

// host:port where host is a container name (docker's rule) or an IPv4 address.
const UPSTREAM = /^([a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}):([0-9]{1,5})$/;

/**
 * Why a rendered route must not be written, or undefined. The syncer already
 * refuses bad routes; writers check again because they are a public API and a
 * config file is the one place a stray `;` or newline does real harm.
 */
export function renderedProblem(route: RenderedRoute): string | undefined {
  if (!validApplicationId(route.applicationId)) return `invalid application id '${route.applicationId}'`;
  if (route.fqdns.length === 0) return `application ${route.applicationId} has no domain names`;
  const bad = route.fqdns.find((f) => !validFqdn(f));
  if (bad !== undefined) return `invalid domain name '${bad.slice(0, 300)}'`;
  const m = UPSTREAM.exec(route.upstream);
  if (!m || !validPort(Number(m[2]))) return `invalid upstream '${route.upstream.slice(0, 300)}'`;
  return undefined;
}

export function assertRenderable(routes: RenderedRoute[]): void {
  for (const route of routes) {
    const problem = renderedProblem(route);
    if (problem !== undefined) throw new Error(problem);
  }
}

/** The file's content, or undefined when it does not exist. */
export async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/**
 * Files a writer touched in one apply, with what they held before, so a
 * rejected change can be put back exactly (undefined = the file did not exist).
 */
export class FileJournal {
  readonly #before = new Map<string, string | undefined>();
  #changed = false;

  /** False while every write and removal so far left the files as they were. */
  get changed(): boolean {
    return this.#changed;
  }

  async write(file: string, content: string): Promise<void> {
    if ((await this.#remember(file)) === content) return;
    this.#changed = true;
    await writeFileAtomic(file, content);
  }

  async remove(file: string): Promise<void> {
    if ((await this.#remember(file)) === undefined) return;
    this.#changed = true;
    await removeFileDurable(file);
  }

  /** Puts every touched file back as it was; keeps going past a failure and reports the first. */
  async restore(): Promise<void> {
    let first: unknown;
    for (const [file, content] of this.#before) {
      try {
        if ((await readIfExists(file)) === content) continue;
        if (content === undefined) await removeFileDurable(file);
        else await writeFileAtomic(file, content);
      } catch (err) {
        first ??= err;
      }
    }
    if (first !== undefined) throw first;
  }

  /** The file's content now (before this write or removal). */
  async #remember(file: string): Promise<string | undefined> {
    const now = await readIfExists(file);
    // Only the first state counts: a file touched twice goes back to what it was before the apply.
    if (!this.#before.has(file)) this.#before.set(file, now);
    return now;
  }
}

/** `relayctl-<application id><ext>`: the one file name a file-based writer owns per application. */
export function routeFilePattern(ext: string): RegExp {
  return new RegExp(`^relayctl-(${UUID_SHAPE})${ext.replace(".", "\\.")}$`);
}

/** Every route file in `dir`, parsed, keyed by application id. */
export async function readRouteFiles(
  dir: string,
  pattern: RegExp,
  parse: (id: string, content: string) => LiveRoute,
): Promise<Map<string, LiveRoute>> {
  const out = new Map<string, LiveRoute>();
  for (const name of (await readdir(dir)).sort()) {
    const id = pattern.exec(name)?.[1];
    if (id === undefined) continue;
    const content = await readIfExists(join(dir, name));
    if (content !== undefined) out.set(id, parse(id, content));
  }
  return out;
}

/** Writes the change's files through the journal (so it can be restored as one unit). */
export async function stageRouteFiles(
  journal: FileJournal,
  change: RouteChange,
  fileOf: (applicationId: string) => string,
  render: (route: RenderedRoute) => string,
): Promise<void> {
  const upserted = new Set(change.upsert.map((r) => r.applicationId));
  // An id that is not a UUID is no file of ours (and could be a path): ignored like any unknown id.
  const removals = change.remove.filter((id) => validApplicationId(id) && !upserted.has(id));
  for (const id of removals) await journal.remove(fileOf(id));
  for (const route of change.upsert) await journal.write(fileOf(route.applicationId), render(route));
}
