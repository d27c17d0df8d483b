// One wildcard NATS subscription for a per-server subject family (takeovers,
// cancels), handed to the handlers of the servers this process listens for.
// A gateway listened with one subscription per held agent for each: after a
// restart that was 20,000 SUBs and UNSUBs for 10,000 agents, and their state in
// memory for as long as the streams lived. Messages for servers held elsewhere
// arrive too and are dropped here: a takeover or a cancel is rare (a connect, a
// log follow's end). The job subject stays per server: NATS's "no responders"
// answer is how an api learns that no gateway holds the agent.
import type { NatsConnection, Subscription } from "nats";
import type { Unsubscribe } from "./job-bus.js";

export class ServerFanout<T> {
  readonly #handlers = new Map<string, Set<(value: T) => void>>();
  #sub: Subscription | undefined;

  constructor(
    private readonly nc: NatsConnection,
    /** The family's wildcard, e.g. relayctl.v1.agent.*.takeover. */
    private readonly wildcard: string,
    /** The server id's token in a subject of the family (its index after splitting on "."). */
    private readonly serverToken: number,
    private readonly decode: (data: Uint8Array) => T,
  ) {}

  /** Listens for one server's messages; the subscription is made with the first listener. */
  on(serverId: string, handler: (value: T) => void): Unsubscribe {
    this.#sub ??= this.nc.subscribe(this.wildcard, {
      callback: (err, msg) => {
        if (err) return;
        const handlers = this.#handlers.get(msg.subject.split(".")[this.serverToken] ?? "");
        if (!handlers) return;
        const value = this.decode(msg.data);
        for (const h of [...handlers]) h(value);
      },
    });
    let set = this.#handlers.get(serverId);
    if (!set) {
      set = new Set();
      this.#handlers.set(serverId, set);
    }
    set.add(handler);
    return () => {
      const current = this.#handlers.get(serverId);
      current?.delete(handler);
      if (current?.size === 0) this.#handlers.delete(serverId);
    };
  }
}
