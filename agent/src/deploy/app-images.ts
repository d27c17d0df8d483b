// Which images on the machine are an application's built images: the one owner of
// that question for retention (retire.ts) and the cleanup of a deleted application
// (containers/cleanup.ts). Built images carry no labels (image-ledger.ts), so an
// image is the application's when a tag of it is in the application's repository
// (relayctl/<application id>:...), or when the ledger recorded it for the
// application (an image a later build of the same tag left untagged). One list of
// the engine's images answers it.
import {
  type CallOptions,
  type ContainerEngine,
  type EngineOutcome,
  STORE_RACE,
  imageIdOf,
} from "../engine/engine.js";
import type { ImageLedger } from "./image-ledger.js";
import { builtImageRepository } from "./naming.js";

export interface AppImage {
  id: string;
  /** The application's tags of it, as bare references (no localhost/ or docker.io/). */
  refs: string[];
  /** It also has tags of something else (another application built the same image): it is shared. */
  shared: boolean;
}

/** "localhost/relayctl/x:1" (podman) and "relayctl/x:1" name one image; ids stay as they are. */
export const bareRef = (ref: string) => ref.replace(/^(localhost|docker\.io)\//, "");

/** A list that meets the shared store's race is asked again this many times. */
const RACE_RETRIES = 3;

const raced = (o: EngineOutcome) =>
  o.status === "completed" && o.exitCode !== 0 && STORE_RACE.test(`${o.stderr}${o.stdout}`);

/** The application's images, newest first; undefined (with the outcome) when the engine could not list. */
export async function applicationImages(
  engine: ContainerEngine,
  ledger: ImageLedger,
  applicationId: string,
  opts: () => CallOptions,
): Promise<{ images: AppImage[] } | { images: undefined; failed: EngineOutcome }> {
  let o = await engine.imageList(opts());
  for (let retry = 0; retry < RACE_RETRIES && raced(o); retry++) o = await engine.imageList(opts());
  if (o.status !== "completed" || o.exitCode !== 0) return { images: undefined, failed: o };
  const own = `${builtImageRepository(applicationId)}:`;
  const recorded = new Set(ledger.ofApplication(applicationId).map((e) => e.imageId));
  const byId = new Map<string, { id: string; refs: string[]; others: number }>();
  for (const line of o.stdout.split("\n")) {
    const [rawId = "", ref = ""] = line.trim().split(/\s+/);
    const id = imageIdOf(rawId);
    if (id === undefined) continue;
    const image = byId.get(id) ?? { id, refs: [], others: 0 };
    const bare = bareRef(ref);
    if (bare.startsWith(own)) image.refs.push(bare);
    else if (ref !== "" && !ref.includes("<none>")) image.others++;
    byId.set(id, image);
  }
  const images = [...byId.values()]
    .filter((i) => i.refs.length > 0 || recorded.has(i.id))
    .map((i) => ({ id: i.id, refs: i.refs, shared: i.others > 0 }));
  return { images };
}

/**
 * What to remove for the image to go as far as it is the application's: each of its
 * tags (the last one removes the image), or its id when it has no tag at all. A
 * shared image without the application's tags is left to its other owner.
 */
export function removalTargets(image: AppImage): string[] {
  if (image.refs.length > 0) return image.refs;
  return image.shared ? [] : [image.id];
}
