// The RouteWriter port: one reverse proxy as the agent sees it. Adapters are
// named by technology: caddy-writer.ts (admin API), nginx-writer.ts (one file per
// application, `nginx -t` then reload, rollback), traefik-writer.ts (file
// provider, one YAML file per application). A writer only ever touches routes it
// manages (tagged with the application id); anything else in the proxy is kept.
import type { RenderedRoute } from "./route.js";

/** A managed route as the proxy has it right now. */
export interface LiveRoute extends RenderedRoute {
  /**
   * False when the proxy holds something for this application that the writer
   * did not write as it stands (an edited file, a changed handler): drift even
   * when domains and upstream still match.
   */
  pristine: boolean;
}

export interface RouteChange {
  /** Routes to create or replace. */
  upsert: RenderedRoute[];
  /** Application ids whose routes go away (unknown ids are ignored). */
  remove: string[];
}

export interface RouteWriter {
  readonly kind: "caddy" | "nginx" | "traefik";
  /** Writes the health path (HEALTH_PATH) and its drain state; absent: the proxy has none. */
  readonly drains?: boolean;
  /** Every route this writer manages, keyed by application id, read from the live proxy. */
  readAll(): Promise<Map<string, LiveRoute>>;
  /**
   * The routes as this writer last read or wrote them, without asking the proxy;
   * undefined when it keeps none. A guess only a write can confirm: apply() after
   * it writes only while the proxy still holds exactly that (a conditional write),
   * else throws ProxyChangedError and writes nothing. A caller that would write
   * nothing must readAll() instead of trusting it.
   */
  known?(): Map<string, LiveRoute> | undefined;
  /**
   * Applies the whole change as one unit (one config load, one reload). On
   * failure the proxy is left as it was (rolled back where the proxy needs it)
   * and the error says why.
   */
  apply(change: RouteChange): Promise<void>;
}

/** apply() found the proxy changed by someone else since it was last read or written: nothing was written. */
export class ProxyChangedError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ProxyChangedError";
  }
}
