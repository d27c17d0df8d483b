// How many application log follows may be open at once, per credential and per
// tenant (RELAYCTL_LOGS_FOLLOWS_PER_KEY, _PER_TENANT): each holds an HTTP
// connection here and an engine child on the agent. Counted in memory by the
// api instance that serves the follows (a follow lives on one instance, and
// counting in the database would cost writes, and a sweep after a crash, for
// what is a bound against runaway clients): with N api instances behind a
// balancer a tenant may reach N times the bound.
import { RcError } from "../errors.js";

export interface FollowBounds {
  followsPerKey: number;
  followsPerTenant: number;
}

export class FollowLimits {
  readonly #byKey = new Map<string, number>();
  readonly #byTenant = new Map<string, number>();

  /** `what`: the streams counted, as the refusal names them (deployments' live logs reuse this). */
  constructor(
    private readonly bounds: FollowBounds,
    private readonly what = "log follows",
  ) {}

  /** Takes a place for one follow (429 when either bound is reached); call the returned release once. */
  acquire(keyId: string, tenantId: string): () => void {
    const key = this.#byKey.get(keyId) ?? 0;
    if (key >= this.bounds.followsPerKey)
      throw refused(
        `at most ${this.bounds.followsPerKey} ${this.what} may be open at once per key: close one first`,
      );
    const tenant = this.#byTenant.get(tenantId) ?? 0;
    if (tenant >= this.bounds.followsPerTenant)
      throw refused(
        `at most ${this.bounds.followsPerTenant} ${this.what} may be open at once per tenant: close one first`,
      );
    this.#byKey.set(keyId, key + 1);
    this.#byTenant.set(tenantId, tenant + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#decrement(this.#byKey, keyId);
      this.#decrement(this.#byTenant, tenantId);
    };
  }

  #decrement(counts: Map<string, number>, id: string): void {
    const n = (counts.get(id) ?? 1) - 1;
    if (n <= 0) counts.delete(id);
    else counts.set(id, n);
  }
}

/** 429: a place frees as soon as one of the follows ends. */
function refused(detail: string): RcError {
  return new RcError("RC_ERR_RATE_LIMITED", detail);
}
