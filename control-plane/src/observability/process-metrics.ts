// prom-client's default metrics, with the three that grow with the process's
// connections made cheap for a gateway holding 10,000 agents. prom-client reads
// /proc/self/fd with a synchronous readdir (20,000 entries: ~18 ms of a blocked
// event loop on a fast machine, several times that on a slow one), and lists
// the active handles and resources twice each per scrape, once for the series
// by type and once for the total. Here the fds are counted off the event loop
// (openFds), and each list is taken once per scrape and shared by its two
// series. Names, help texts and labels are prom-client's, so dashboards built
// on the defaults keep working.
import { readdir, stat } from "node:fs/promises";
import { Gauge, type Registry, collectDefaultMetrics } from "prom-client";

/** Registers prom-client's default metrics on `registry`, under `prefix`. */
export function collectProcessMetrics(registry: Registry, prefix: string): void {
  collectDefaultMetrics({ register: registry, prefix });
  const replace = (name: string): boolean => {
    if (!registry.getSingleMetric(prefix + name)) return false;
    registry.removeSingleMetric(prefix + name);
    return true;
  };

  if (replace("process_open_fds")) {
    new Gauge({
      name: `${prefix}process_open_fds`,
      help: "Number of open file descriptors.",
      registers: [registry],
      async collect() {
        try {
          this.set(await openFds());
        } catch {
          // No /proc here: the series stays at its last value.
        }
      },
    });
  }

  const handles = once(() =>
    countBy((process as unknown as { _getActiveHandles(): object[] })._getActiveHandles(), nameOf),
  );
  if (replace("nodejs_active_handles") && replace("nodejs_active_handles_total")) {
    byTypeAndTotal(registry, `${prefix}nodejs_active_handles`, handles, {
      byType: "Number of active libuv handles grouped by handle type. Every handle type is C++ class name.",
      total: "Total number of active handles.",
    });
  }
  const resources = once(() => countBy(process.getActiveResourcesInfo(), (r) => r));
  if (replace("nodejs_active_resources") && replace("nodejs_active_resources_total")) {
    byTypeAndTotal(registry, `${prefix}nodejs_active_resources`, resources, {
      byType:
        "Number of active resources that are currently keeping the event loop alive, grouped by async resource type.",
      total: "Total number of active resources.",
    });
  }
}

/**
 * Linux 6.2 and later give /proc/self/fd's size as the number of open
 * descriptors, without a listing; older kernels give 0 (a process always has
 * some), and then the directory is listed, minus the descriptor the listing
 * itself holds open, as prom-client counts.
 */
async function openFds(): Promise<number> {
  const { size } = await stat("/proc/self/fd");
  return size > 0 ? size : (await readdir("/proc/self/fd")).length - 1;
}

interface Counts {
  byType: Map<string, number>;
  total: number;
}

function byTypeAndTotal(
  registry: Registry,
  name: string,
  counts: () => Counts,
  help: { byType: string; total: string },
): void {
  new Gauge({
    name,
    help: help.byType,
    labelNames: ["type"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [type, n] of counts().byType) this.set({ type }, n);
    },
  });
  new Gauge({
    name: `${name}_total`,
    help: help.total,
    registers: [registry],
    collect() {
      this.set(counts().total);
    },
  });
}

function nameOf(handle: unknown): string | undefined {
  return (handle as { constructor?: { name?: string } } | null)?.constructor?.name;
}

function countBy<T>(list: T[], key: (item: T) => string | undefined): Counts {
  const byType = new Map<string, number>();
  for (const item of list) {
    const type = key(item);
    if (type !== undefined) byType.set(type, (byType.get(type) ?? 0) + 1);
  }
  return { byType, total: list.length };
}

/**
 * `f`'s answer, computed at most once per tick: a scrape calls every metric's
 * `collect` in the same tick, so a list's two series share one listing.
 */
function once<T>(f: () => T): () => T {
  let cached: { value: T } | undefined;
  return () => {
    if (!cached) {
      cached = { value: f() };
      queueMicrotask(() => {
        cached = undefined;
      });
    }
    return cached.value;
  };
}
