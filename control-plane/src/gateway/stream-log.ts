// One agent stream's log lines, each naming its server and connection, without a pino child per
// stream: a child holds its serialized bindings and its own level methods (~1 KB), and a gateway
// holds 10,000 streams. The lines are the child's, byte for byte (stream-log.test.ts): pino writes
// a child's bindings before the line's own fields, as they are here.
import type { Logger } from "pino";

type Fields = Record<string, unknown>;

export class StreamLog {
  constructor(
    private readonly parent: Logger,
    private readonly serverId: string,
    private readonly connectionId: string,
  ) {}

  info(fields: Fields, msg: string): void {
    if (this.parent.isLevelEnabled("info")) this.parent.info(this.with(fields), msg);
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
