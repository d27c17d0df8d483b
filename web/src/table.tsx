// The dashboard's one table: every list (servers, applications, deployments, operations,
// keys, members, registry credentials) is a set of columns over rows, drawn here with the
// same markup, so the pages look alike and keep the same accessibility: a region that
// takes focus to scroll sideways, column headers with scope, and a row header. At phone
// width each row is a card, every cell labelled with its column: no column is off-screen.
import type { ComponentChildren } from "preact";

export interface Column<T> {
  /** The column's header. */
  head: string;
  /** Header for screen readers only (a column of buttons). */
  hideHead?: boolean;
  /** The class of each of its cells (mono, …). */
  class?: string;
  cell: (row: T) => ComponentChildren;
}

export interface TableProps<T> {
  /** Names the scrollable region. */
  label: string;
  /** A caption for screen readers (what the table is, how it updates). */
  caption?: string;
  columns: Column<T>[];
  rows: T[];
  rowKey: (row: T) => string;
  /** Extra attributes of a row (data-* the tests find a row by). */
  rowAttrs?: (row: T) => Record<string, string>;
  /** The first column names its row (`<th scope="row">`). @default true */
  rowHeader?: boolean;
  testId?: string;
}

export function Table<T>({
  label,
  caption,
  columns,
  rows,
  rowKey,
  rowAttrs,
  rowHeader = true,
  testId,
}: TableProps<T>) {
  // At phone width the rows are drawn as cards (display: block; Chromium still exposes a
  // table, checked in its accessibility tree), each cell's data-label naming its column.
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must take focus to scroll by keyboard
    <section class="table-wrap" tabIndex={0} aria-label={label}>
      <table data-testid={testId}>
        {caption && <caption class="sr-only">{caption}</caption>}
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.head} scope="col">
                {c.hideHead ? <span class="sr-only">{c.head}</span> : c.head}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)} {...rowAttrs?.(row)}>
              {columns.map((c, i) =>
                rowHeader && i === 0 ? (
                  <th key={c.head} scope="row" class={c.class}>
                    {c.cell(row)}
                  </th>
                ) : (
                  <td key={c.head} class={c.class} data-label={c.hideHead ? undefined : c.head}>
                    {c.cell(row)}
                  </td>
                ),
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
