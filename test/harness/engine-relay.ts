// A container engine's API socket seen through a unix-socket relay of the test's
// own: it records the requests every client sends (method and path), and can hold
// back what the engine's event stream sends (the connection that asks
// `GET /events?filters=`, not a catch-up's `stream=false`): a stream lagging
// behind the engine on demand, as podman's lags behind its events log. Nothing
// else is changed on the way, but for the requests made slow on demand (slow()): an engine
// whose answers take seconds, as podman's do on a loaded machine.
import net from "node:net";
import { join } from "node:path";
import { makeTempDir, onCleanup } from "./cleanup";

export class EngineRelay {
  readonly path = join(makeTempDir("engine-relay"), "engine.sock");
  /** "GET /path" of every request seen, in order. */
  readonly requests: string[] = [];
  #held: Buffer[] | undefined;
  readonly #streams = new Set<net.Socket>();
  #slow: { pattern: RegExp; ms: number; skip: number } | undefined;
  readonly #server: net.Server;

  constructor(readonly engineSocket: string) {
    this.#server = net.createServer((client) => {
      const engine = net.connect(engineSocket);
      let isStream: boolean | undefined;
      // What the client sent goes on in order, a slow request's chunk after its wait.
      let sent = Promise.resolve();
      client.on("data", (chunk) => {
        const text = chunk.toString("latin1");
        let wait = 0;
        for (const m of text.matchAll(/^(GET|POST|PUT|DELETE|HEAD) (\S+) HTTP\/1\.[01]\r$/gm)) {
          const request = `${m[1]} ${m[2]}`;
          this.requests.push(request);
          const slow = this.#slow;
          if (slow?.pattern.test(request) && slow.skip-- <= 0) wait = slow.ms;
        }
        isStream ??= text.startsWith("GET /events?filters=");
        if (isStream) this.#streams.add(client);
        sent = sent
          .then(() => (wait > 0 ? new Promise((r) => setTimeout(r, wait)) : undefined))
          .then(() => {
            if (!engine.destroyed) engine.write(chunk);
          });
      });
      engine.on("data", (chunk) => {
        if (isStream && this.#held !== undefined) this.#held.push(chunk);
        else client.write(chunk);
      });
      const end = () => {
        client.destroy();
        engine.destroy();
        this.#streams.delete(client);
      };
      client.on("close", end).on("error", end);
      engine.on("close", end).on("error", end);
    });
  }

  listen(): Promise<void> {
    onCleanup(() => new Promise<void>((resolve) => this.#server.close(() => resolve())));
    return new Promise((resolve) => this.#server.listen(this.path, resolve));
  }

  /** Requests seen whose "METHOD path" matches. */
  count(pattern: RegExp): number {
    return this.requests.filter((r) => pattern.test(r)).length;
  }

  /** Requests matching `pattern` reach the engine `ms` late, but the first `skip` of them. */
  slow(pattern: RegExp, ms: number, skip = 0): void {
    this.#slow = { pattern, ms, skip };
  }

  /** Every request reaches the engine at once again. */
  fast(): void {
    this.#slow = undefined;
  }

  hold(): void {
    this.#held = [];
  }

  /** Sends what was held to the streams open, and lets them flow again. */
  release(): void {
    const held = this.#held ?? [];
    this.#held = undefined;
    for (const s of this.#streams) for (const chunk of held) s.write(chunk);
  }
}
