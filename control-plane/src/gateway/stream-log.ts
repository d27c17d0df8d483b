// One agent stream's log lines, each naming its server and connection, without a pino child per
// stream: a child holds its serialized bindings and its own level methods (~1 KB), and a gateway
// holds 10,000 streams. The lines are the child's, byte for byte (stream-log.test.ts): pino writes
// a child's bindings before the line's own fields, as they are here.
//
// The lines every agent writes once per connection ("agent connected", "agent stream closed") are
// budgeted per gateway: at most LINES_PER_SECOND of each a second. In a reconnect storm 10,000
// agents wrote 10,000 of each within seconds (2.75 MB); on a pipe its reader drained slowly, the
// gateway's event loop then slept 100 ms at a time (pino's synchronous write waiting on a full
// pipe), and journald's default rate limit (10,000 lines in 30 s) would drop them anyway, with
// whatever else came then. The lines past the budget are counted and said in one line when their
// second ends.
import type { Logger } from "pino";

type Fields = Record<string, unknown>;

/** Lines of one message a gateway writes a second, at most; the rest are counted. */
export const LINES_PER_SECOND = 20;

/** One message's budget of lines a second, on one logger. */
export class LineBudget {
  #second = 0;
  #used = 0;
  #left = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly log: Logger,
    private readonly msg: string,
    private readonly perSecond = LINES_PER_SECOND,
    private readonly now: () => number = Date.now,
  ) {}

  /** Whether a line may be written now; if not, it is counted and said when its second ends. */
  take(): boolean {
    const second = Math.floor(this.now() / 1000);
    if (second !== this.#second) {
      this.#say();
      this.#second = second;
      this.#used = 0;
    }
    if (this.#used < this.perSecond) {
      this.#used++;
      return true;
    }
    this.#left++;
    this.#timer ??= setTimeout(
      () => {
        this.#timer = undefined;
        this.#say();
      },
      1000 - (this.now() % 1000),
    ).unref();
    return false;
  }

  #say(): void {
    if (this.#left === 0) return;
    this.log.info(
      { lines_left_out: this.#left },
      `${this.msg}: ${this.#left} more in that second, over the ${this.perSecond} lines a second written`,
    );
    this.#left = 0;
  }
}

const budgets = new WeakMap<Logger, Map<string, LineBudget>>();

/** The gateway's budget of `msg` lines (one per logger and message). */
function budgetOf(log: Logger, msg: string): LineBudget {
  let byMsg = budgets.get(log);
  if (!byMsg) {
    byMsg = new Map();
    budgets.set(log, byMsg);
  }
  let budget = byMsg.get(msg);
  if (!budget) {
    budget = new LineBudget(log, msg);
    byMsg.set(msg, budget);
  }
  return budget;
}

export class StreamLog {
  constructor(
    private readonly parent: Logger,
    private readonly serverId: string,
    private readonly connectionId: string,
  ) {}

  info(fields: Fields, msg: string): void {
    if (this.parent.isLevelEnabled("info")) this.parent.info(this.with(fields), msg);
  }

  /** An info line every connection writes: within the gateway's budget of that message (LineBudget). */
  perConnection(fields: Fields, msg: string): void {
    if (this.parent.isLevelEnabled("info") && budgetOf(this.parent, msg).take())
      this.parent.info(this.with(fields), msg);
  }

  error(fields: Fields, msg: string): void {
    if (this.parent.isLevelEnabled("error")) this.parent.error(this.with(fields), msg);
  }

  /** pino's child, for code that takes a Logger (made when asked: rare paths only). */
  child(): Logger {
    return this.parent.child({ server_id: this.serverId, connection_id: this.connectionId });
  }

  private with(fields: Fields): Fields {
    return { server_id: this.serverId, connection_id: this.connectionId, ...fields };
  }
}
