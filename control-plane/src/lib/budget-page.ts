// Pages bounded by a count AND by the size of their JSON: one listing entry can
// carry up to a few tens of KB (an output preview of control bytes grows 6x
// when JSON-escaped), so a count alone does not bound a response or the
// memory it takes to build it. Rows are read in chunks and presented chunk by
// chunk, so at most one chunk beyond the page is ever in memory.

export interface BudgetPageOptions<R, E> {
  /** Most entries in a page. */
  max: number;
  /** Most bytes of JSON in a page (a page always holds at least one entry). */
  budgetBytes: number;
  /** Rows read per query. */
  chunk: number;
  /** The next `limit` rows after `after` (undefined: from the start), in page order. */
  fetch(after: R | undefined, limit: number): Promise<R[]>;
  /** The entries of `rows`, in the same order. */
  present(rows: R[]): Promise<E[]> | E[];
}

export interface BudgetPage<R, E> {
  entries: E[];
  /** The row of the page's last entry, when more follow (the next page's cursor). */
  next: R | undefined;
}

export async function budgetPage<R, E>(o: BudgetPageOptions<R, E>): Promise<BudgetPage<R, E>> {
  const entries: E[] = [];
  let bytes = 2;
  let after: R | undefined;
  for (;;) {
    const want = Math.min(o.chunk, o.max - entries.length);
    const rows = await o.fetch(after, want + 1);
    const batch = rows.slice(0, want);
    const presented = await o.present(batch);
    for (let i = 0; i < batch.length; i++) {
      const size = Buffer.byteLength(JSON.stringify(presented[i])) + 1;
      if (entries.length > 0 && bytes + size > o.budgetBytes) return { entries, next: after };
      entries.push(presented[i]!);
      bytes += size;
      after = batch[i];
    }
    if (rows.length <= want) return { entries, next: undefined };
    if (entries.length >= o.max) return { entries, next: after };
  }
}
