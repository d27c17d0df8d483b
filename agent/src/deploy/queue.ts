// Deployments of one application run one at a time, in the order the agent
// received them (DESIGN.md "Deployments"); different applications do not wait
// for each other. A task holds its application's turn until the promise it
// returns settles: for a deployment, its result (deployer.ts retires after it).

export class SerialQueues {
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `task` after every earlier task of `key` has settled. */
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const before = this.#tails.get(key) ?? Promise.resolve();
    const result = before.then(task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    // The last task of a key forgets it, so the map does not grow with every application ever deployed.
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }

  /** Resolves when every task queued so far has settled. */
  async idle(): Promise<void> {
    await Promise.all([...this.#tails.values()]);
  }
}
