// make dev's reverse proxy: one Caddy (DESIGN.md Facts: admin API on a loopback port, HOME and
// XDG dirs in the dev state dir, so it never touches the person's own Caddy data), supervised.
// The agent owns the routes (RELAYCTL_AGENT_PROXY=caddy writes them through the admin API);
// this module only keeps Caddy running.
//
// Routes across restarts: Caddy saves every config the agent loads to
// <state>/caddy/config/caddy/autosave.json, and each start here resumes it (`caddy run --resume`), so a
// Caddy that crashed (or the next `make dev`) comes back with the agent's routes at once. The
// agent's route ledger (routes.json) would also re-apply a lost route, but only at its next sync
// of that application (drift_recovered), so without --resume every app would stay unrouted
// until redeployed. Before each start the autosave's admin and listen addresses are set to this
// run's, which may differ from the run that saved it.
import { existsSync, readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { pollUntil } from "@relayctl/devkit";
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync";

const READY_MS = 15_000;
/** Restart backoff: doubles from MIN to MAX; back to MIN once Caddy stayed up STABLE_MS. */
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 15_000;
const STABLE_MS = 30_000;
/** The agent's Caddy server name (RELAYCTL_AGENT_CADDY_SERVER's default). */
const AGENT_SERVER = "relayctl";
/** Caddy warnings that are dev's own choices (no HTTPS on loopback) or its normal stop. */
const EXPECTED = new Set(["automatic HTTPS is completely disabled for server", "exiting; byeee!! 👋"]);

/** caddy's path on PATH, or undefined. */
export function caddyBinary() {
  const dirs = (process.env.PATH ?? "").split(delimiter).filter(Boolean);
  return dirs.map((d) => join(d, "caddy")).find((p) => existsSync(p));
}

async function adminAnswers(adminUrl) {
  try {
    const res = await fetch(`${adminUrl}/config/`, { signal: AbortSignal.timeout(2_000) });
    await res.body?.cancel();
    return res.status === 200 ? true : undefined;
  } catch {
    return undefined;
  }
}

/** Points the saved config (if any) at this run's admin and listen addresses. */
async function retargetAutosave(file, adminListen, listen) {
  if (!existsSync(file)) return;
  let config;
  try {
    config = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    config = {}; // unreadable: Caddy would refuse it; start from the boot config's admin only
  }
  config.admin = { ...(config.admin ?? {}), listen: adminListen };
  const server = config.apps?.http?.servers?.[AGENT_SERVER];
  if (server) server.listen = [listen];
  await writeFileAtomic(file, JSON.stringify(config), 0o600);
}

/**
 * Starts Caddy under `group` and keeps it running until stop(). Resolves once its admin API
 * answers; rejects when the first start fails (the reason in its last output lines).
 */
export async function startDevProxy({ group, stateDir, port, adminPort, print, say, warn }) {
  const bin = caddyBinary();
  const dir = join(stateDir, "caddy");
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const adminListen = `127.0.0.1:${adminPort}`;
  const adminUrl = `http://${adminListen}`;
  const listen = `127.0.0.1:${port}`;
  const bootFile = join(dir, "boot.json");
  const pidFile = join(dir, "caddy.pid");
  await writeFileAtomic(bootFile, JSON.stringify({ admin: { listen: adminListen } }), 0o600);
  const env = {
    ...process.env,
    HOME: dir,
    XDG_DATA_HOME: join(dir, "data"),
    XDG_CONFIG_HOME: join(dir, "config"),
  };
  const autosave = join(dir, "config", "caddy", "autosave.json");

  let stopped = false;
  let proc;
  const launch = async () => {
    await retargetAutosave(autosave, adminListen, listen);
    proc = group.start({
      name: "caddy",
      command: bin,
      // --resume with --config works too, but warns at every start that it ignores --config.
      args: ["run", ...(existsSync(autosave) ? ["--resume"] : ["--config", bootFile])],
      env,
      cwd: dir,
      detached: true,
      keepLines: 100,
      // Caddy logs JSON at info on stderr; only its unexpected warnings and errors reach the terminal.
      onLine: (l) => {
        if (!l.json) return print(l.text);
        if (
          ["warn", "error", "fatal", "panic"].includes(String(l.json.level)) &&
          !EXPECTED.has(String(l.json.msg))
        )
          print(l.text);
      },
    });
    const p = proc;
    await Promise.race([
      pollUntil(() => adminAnswers(adminUrl), { what: `caddy admin API ${adminUrl}`, timeoutMs: READY_MS }),
      p.exited.then((e) => {
        throw new Error(`caddy exited at start (${e.signal ?? `exit code ${e.code}`}): ${p.tail(5)}`);
      }),
    ]);
    // Written here, not with caddy's --pidfile: caddy removes that file in each of the signal
    // handlers a group stop reaches, and reports the second removal as an unclean shutdown.
    await writeFileAtomic(pidFile, `${p.pid}\n`, 0o600);
    return p;
  };

  const supervise = (p, backoff) => {
    const upSince = Date.now();
    p.exited.then(async (e) => {
      if (stopped) return;
      const delay = Date.now() - upSince >= STABLE_MS ? BACKOFF_MIN_MS : backoff;
      warn(
        `caddy exited unexpectedly (${e.signal ?? `exit code ${e.code}`}); restarting it in ${delay} ms with its saved routes`,
      );
      await new Promise((r) => setTimeout(r, delay));
      if (stopped) return;
      try {
        const next = await launch();
        say(`caddy is back (admin ${adminUrl}, apps on ${listen})`);
        supervise(next, Math.min(delay * 2, BACKOFF_MAX_MS));
      } catch (err) {
        supervise(proc, Math.min(delay * 2, BACKOFF_MAX_MS));
        warn(`caddy restart failed: ${err.message.split("\n")[0]}`);
      }
    });
  };

  supervise(await launch(), BACKOFF_MIN_MS);
  return {
    adminUrl,
    listen,
    url: `http://${listen}`,
    pidFile,
    /** Stops supervising (ProcessGroup.stopAll stops the process itself). */
    stop() {
      stopped = true;
    },
  };
}
