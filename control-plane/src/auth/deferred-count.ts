// An automation key's request counted in the commit of the operation it starts,
// instead of in a round trip of its own before the route runs (issue 34: that
// round trip was the whole gap between an exec and its floor on a fast-fork Intel Xeon).
//
// A key this process admitted the full way (admit-automation-key.ts) keeps its
// row here, with a digest of the admission's columns that MariaDB computes. A
// later request of the key on a route that declares `countWithStart` is admitted
// against that row in the process, with no round trip, and its count travels with
// the operation's start: the transaction that commits the start (the gateway's,
// or the api's own) adds it to the key's window and then runs a guard that stops
// the transaction unless the key's row still has that digest and the window's
// count is within the row's limit (and no later window has begun). So:
//
//   - the limit stays exact across instances: the count is the same atomic
//     increment of the same row, and it commits with the start or not at all;
//   - a revoke or any change of the key committed before the start commits
//     refuses the start (its digest no longer matches), so nothing runs on a
//     key's old row;
//   - every request is counted exactly once: a start that commits carries its
//     count, whichever side commits it (the gateway, or the api itself when the
//     gateway refused the job or the wait ended); anything else (a guard refused,
//     the body was invalid, the server unknown or out of the key's scope) runs
//     the full admission as before, before the request is answered, and its
//     refusals (429, 401, 403) answer in the place of whatever the route would
//     have said. A start's row is inserted before its count, so when the api
//     commits a start its gateway committed first, the row makes it "already"
//     (nothing counted twice), and a gateway that comes after the api fails on
//     the row the same way.
//
// A key near its limit (or in a window this process has not counted in yet) is
// admitted the full way, so guards rarely refuse: one that does costs its batch a
// retry item by item (audit/group-commit.ts).
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Statement } from "../db/statement.js";
import type { ServerRef } from "../operations/outcome.js";
import type { OperationScope } from "../operations/types.js";
import { requireServerScope } from "../servers/scope.js";
import { KEY_ROW_COLUMNS, requireOperation } from "./automation-key.js";

declare module "fastify" {
  interface FastifyRequest {
    /** A count not yet made (this file), or null. */
    deferredAdmission: DeferredAdmission | null;
    /** A refusal of the admission run after the route had already failed: answered in its place. */
    admissionRefusal: Error | null;
  }
}

/** A request's count as it travels with its start (bus/job-start.ts). */
export interface CountWithStart {
  key_id: string;
  window_seconds: number;
  window_start: number;
  /** The key row's digest (KEY_DIGEST_SQL) the request was admitted on. */
  digest: string;
}

/**
 * The digest MariaDB computes of a key row `k`'s admission columns (KEY_ROW_COLUMNS):
 * read with the row by the full admission, computed again by the guard.
 */
export const KEY_DIGEST_SQL = `MD5(JSON_ARRAY(${KEY_ROW_COLUMNS.map((c) => `k.\`${c}\``).join(", ")}))`;

/** MySQL's "Subquery returns more than 1 row": how the guard stops a transaction. */
const GUARD_ERRNO = 1242;

/** The guard refused a start's count: the request is to be admitted the full way. */
export const isCountRefused = (err: unknown): boolean =>
  (err as { errno?: number } | null)?.errno === GUARD_ERRNO;

export class CountRefusedError extends Error {
  constructor(cause: unknown) {
    super("the request's count was refused with its start", { cause });
    this.name = "CountRefusedError";
  }
}

/**
 * The statements that count `counts` (one per request) in the transaction of
 * their starts, each key's window once: its increment, then its guard, which
 * raises GUARD_ERRNO (ending the multi-statement before anything after it)
 * unless the key row still has the digest, the count is within its limit, and no
 * later window of the key has begun.
 */
export function countStatements(counts: readonly CountWithStart[]): Statement[] {
  const groups = new Map<string, { c: CountWithStart; n: number }>();
  for (const c of counts) {
    const slot = `${c.key_id}\n${c.window_seconds}\n${c.window_start}\n${c.digest}`;
    const g = groups.get(slot);
    if (g) g.n++;
    else groups.set(slot, { c, n: 1 });
  }
  return [...groups.values()].flatMap(({ c, n }) => [
    {
      sql: "INSERT INTO `rate_limit_counters` (`key_id`, `window_seconds`, `window_start`, `count`) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE `count` = `count` + ?",
      bindings: [c.key_id, c.window_seconds, c.window_start, n, n],
    },
    {
      sql: `SET @rc_count_guard = (SELECT 1 UNION ALL SELECT 1 FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM \`automation_keys\` k JOIN \`rate_limit_counters\` c ON c.\`key_id\` = k.\`id\` AND c.\`window_seconds\` = ? AND c.\`window_start\` = ? WHERE k.\`id\` = ? AND c.\`count\` <= k.\`rate_limit\` AND ${KEY_DIGEST_SQL} = ?) OR EXISTS (SELECT 1 FROM \`rate_limit_counters\` n WHERE n.\`key_id\` = ? AND n.\`window_seconds\` = ? AND n.\`window_start\` > ?))`,
      bindings: [
        c.window_seconds,
        c.window_start,
        c.key_id,
        c.digest,
        c.key_id,
        c.window_seconds,
        c.window_start,
      ],
    },
  ]);
}

/** What a start carries for the operations service: the count, and the full admission for when it cannot go. */
export interface DeferredCount {
  count: CountWithStart;
  /**
   * Runs the full admission (counting the request) and throws its refusal (429, 401, 403); on a
   * key row other than the one the request was admitted on, the route's operation scope and the
   * start's server are judged again on the new row (403).
   */
  admit(): Promise<void>;
}

/** Admits the request the full way (setting its principal): whether its row differs from the one cached. */
export type FullAdmission = (req: FastifyRequest, reply: FastifyReply) => Promise<{ changed: boolean }>;

/**
 * A request admitted on a cached key row, its count not made yet: `pending`
 * until a start takes it (handOff) or the full admission runs (settle).
 */
export class DeferredAdmission {
  #state: "pending" | "handed" | "settled" = "pending";
  #settling: Promise<{ changed: boolean }> | undefined;

  constructor(
    readonly count: CountWithStart,
    private readonly req: FastifyRequest,
    private readonly reply: FastifyReply,
    private readonly full: FullAdmission,
    /** The route's operation scope (judged again when the row changed). */
    private readonly scope: OperationScope | undefined,
  ) {}

  get pending(): boolean {
    return this.#state === "pending";
  }

  /**
   * The full admission, once (it counts the request): its refusal is thrown; resolves with
   * whether the key row it read differs from the one the request was admitted on.
   */
  settle(): Promise<{ changed: boolean }> {
    this.#state = "settled";
    this.#settling ??= this.full(this.req, this.reply);
    return this.#settling;
  }

  /** The count for the start of an operation on `server`; the start now owns it (commits it, or admits). */
  handOff(server: ServerRef): DeferredCount | undefined {
    if (this.#state !== "pending") return undefined;
    this.#state = "handed";
    return {
      count: this.count,
      admit: async () => {
        if (!(await this.settle()).changed) return;
        // The same start then commits on the new row: judged as the route would judge it there.
        const { principal } = this.req;
        if (this.scope) requireOperation(principal, this.scope);
        requireServerScope(principal, server);
      },
    };
  }
}

/**
 * The count a route's start on `server` may carry: handed off from the request's
 * deferred admission (then the operations service commits it with the start or admits).
 */
export function countForStart(req: FastifyRequest, server: ServerRef): DeferredCount | undefined {
  return req.deferredAdmission?.handOff(server);
}

/**
 * Before a refusal that depends on the key's row is answered: runs a pending
 * admission, whose own refusal then answers; true when the row changed (the
 * refusal is to be judged again on the new row).
 */
export async function reconfirmed(req: FastifyRequest): Promise<boolean> {
  const d = req.deferredAdmission;
  if (!d?.pending) return false;
  return (await d.settle()).changed;
}
