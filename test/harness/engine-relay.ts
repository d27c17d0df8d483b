// A container engine's API socket seen through a unix-socket relay of the test's
// own: it records the requests every client sends (method and path), and can hold
// back what the engine's event stream sends (the connection that asks
// `GET /events?filters=`, not a catch-up's `stream=false`): a stream lagging
// behind the engine on demand, as podman's lags behind its events log. Nothing
// else is changed on the way.
import net from "node:net";
import { join } from "node:path";
import { makeTempDir, onCleanup } from "./cleanup";

export class EngineRelay {
  readonly path = join(makeTempDir("engine-relay"), "engine.sock");
  /** "GET /path" of every request seen, in order. */
  readonly requests: string[] = [];
  #held: Buffer[] | undefined;
  readonly #streams = new Set<net.Socket>();
  readonly #server: net.Server;

  constructor(readonly engineSocket: string) {
    this.#server = net.createServer((client) => {
      const engine = net.connect(engineSocket);
      let isStream: boolean | undefined;
      client.on("data", (chunk) => {
        const text = chunk.toString("latin1");
        for (const m of text.matchAll(/^(GET|POST|PUT|DELETE|HEAD) (\S+) HTTP\/1\.[01]\r$/gm)) {
          this.requests.push(`${m[1]} ${m[2]}`);
        }
        isStream ??= text.startsWith("GET /events?filters=");
        if (isStream) this.#streams.add(client);
        engine.write(chunk);
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
