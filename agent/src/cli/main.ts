#!/usr/bin/env node
// relayctl-agent: `enroll` once, then `run` (as a service). Command line and
// environment are fixed by docs/process-interfaces.md.
import { join } from "node:path";
import { Command } from "commander";
import { AgentConnection } from "../connection/agent-connection.js";
import { bootId } from "../connection/host-info.js";
import { bootStart } from "../containers/boot-start.js";
import { ContainerWatcher } from "../containers/watcher.js";
import { type AgentConfig, ConfigError, gatewayList, loadConfig } from "../config.js";
import { readAgentFile } from "../enrollment/agent-file.js";
import { EnrollError, enroll, parseLabels } from "../enrollment/enroll.js";
import { EngineMonitor } from "../engine/engine-monitor.js";
import { Dispatcher } from "../jobs/dispatcher.js";
import { ProxyMonitor } from "../proxy-status/proxy-monitor.js";
import { createLogger } from "../log.js";
import { PtyRunner } from "../runner/pty-runner.js";
import { logTracingState, startTracing, stopTracing } from "../tracing/index.js";
import { AGENT_VERSION } from "../version.js";
import { warnAboutHost } from "./host-checks.js";

function fail(message: string, code: number): never {
  process.stderr.write(`relayctl-agent: ${message}\n`);
  process.exit(code);
}

function config(): AgentConfig {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) fail(`config: ${err.message}`, 2);
    throw err;
  }
}

async function runEnroll(opts: {
  url: string;
  token: string;
  stateDir?: string;
  label: string[];
}): Promise<void> {
  const stateDir = opts.stateDir ?? config().stateDir;
  try {
    const labels = parseLabels(opts.label);
    const file = await enroll({
      url: opts.url,
      token: opts.token,
      stateDir,
      agentVersion: AGENT_VERSION,
      labels,
    });
    process.stdout.write(`${JSON.stringify({ server_id: file.server_id, server_name: file.server_name })}\n`);
  } catch (err) {
    fail(`enroll: ${(err as Error).message}`, 1);
  }
}

async function runAgent(opts: { stateDir?: string; gateway?: string }): Promise<void> {
  const cfg = config();
  const stateDir = opts.stateDir ?? cfg.stateDir;
  let gatewayUrls = cfg.gatewayUrls;
  if (opts.gateway !== undefined) {
    const parsed = gatewayList.safeParse(opts.gateway);
    if (!parsed.success) fail(`--gateway: ${parsed.error.issues[0]!.message}`, 2);
    gatewayUrls = parsed.data;
  }
  const enrolled = await readAgentFile(stateDir).catch((err: Error) => fail(err.message, 1));

  const log = createLogger(cfg.logLevel);
  startTracing(cfg.tracing, AGENT_VERSION);
  const runner = new PtyRunner({
    shell: cfg.shell,
    outputCapBytes: cfg.outputCapBytes,
    killGraceMs: cfg.killGraceMs,
    launcherHost: cfg.launcherHost,
    fifoDir: join(stateDir, "fifo"), // emptied at start: no FIFOs left over from a crashed agent
  });
  // Probed in the background from here on: exec never waits for it.
  const engines = new EngineMonitor({
    setting: cfg.containerEngine,
    log,
    recheckMs: cfg.engineRecheckSeconds * 1000,
  });
  engines.start();
  // Checked in the background too; reported to the gateway with Hello and on every change.
  const proxyStatus = new ProxyMonitor({ proxy: cfg.proxy, log, recheckMs: cfg.proxyRecheckSeconds * 1000 });
  proxyStatus.start();
  const dispatcher = await Dispatcher.open({
    stateDir,
    runner,
    log,
    containerEngine: cfg.containerEngine,
    engines,
    rebootCommand: cfg.rebootCommand,
    proxy: cfg.proxy,
    deploy: { ...cfg.deploy, serverId: enrolled.server_id },
    outputCapBytes: cfg.outputCapBytes,
  });
  // The deployed containers' states (and, after a reboot, their start: containers/boot-start.ts).
  const containers = new ContainerWatcher({
    engine: () => {
      const working = engines.current?.working;
      return working ? engines.engine(working) : undefined;
    },
    log,
    intervalMs: cfg.containerWatchSeconds * 1000,
    onFirstLook: bootStart({ stateDir, bootId: bootId(cfg.bootIdFile), log }),
    crashHold: { stateDir, firstHoldSeconds: cfg.crashHoldSeconds, serverId: enrolled.server_id },
  });
  containers.start();
  // An engine found (the probe runs in the background) or changed: a look at once, not at the
  // next interval (its crash reports, a boot's starts and podman's died events begin there).
  engines.on("change", () => void containers.poll());
  const connection = new AgentConnection({
    gatewayUrls: gatewayUrls ?? enrolled.gateway_urls,
    credential: enrolled.agent_credential,
    caFile: cfg.caFile,
    backoff: cfg.backoff,
    agentVersion: AGENT_VERSION,
    dispatcher,
    proxyStatus,
    containers,
    log,
    bootIdFile: cfg.bootIdFile,
  });
  log.info({ version: AGENT_VERSION, server_id: enrolled.server_id, state_dir: stateDir }, "agent starting");
  warnAboutHost(cfg.proxy, log);
  connection.start();
  logTracingState(log);

  // Commands still running die with the pty when we exit; the journal turns them
  // into "outcome unknown" results on the next start.
  const shutdown = async (signal: string) => {
    log.info({ signal }, "agent stopping");
    await connection.stop();
    engines.stop();
    proxyStatus.stop();
    containers.stop();
    await runner.close();
    await dispatcher.close();
    await stopTracing();
    process.exit(0);
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  process.once("SIGINT", () => void shutdown("SIGINT"));
}

const program = new Command("relayctl-agent")
  .description("relayctl runner agent: dials out to a gateway and runs jobs")
  .version(AGENT_VERSION);

program
  .command("enroll")
  .description("trade a join token for an agent credential; saves <state-dir>/agent.json")
  .requiredOption("--url <url>", "control plane base URL")
  .requiredOption("--token <token>", "join token (rjt_...)")
  .option(
    "--state-dir <dir>",
    "state directory (default: RELAYCTL_AGENT_STATE_DIR or /var/lib/relayctl-agent)",
  )
  .option(
    "--label <key=value>",
    "a server label for fleet placement (repeatable); the control plane checks the syntax",
    (v: string, all: string[]) => [...all, v],
    [] as string[],
  )
  .action(runEnroll);

program
  .command("run")
  .description("connect to a gateway and run jobs until stopped")
  .option(
    "--state-dir <dir>",
    "state directory (default: RELAYCTL_AGENT_STATE_DIR or /var/lib/relayctl-agent)",
  )
  .option("--gateway <urls>", "comma list of gateway URLs (overrides RELAYCTL_AGENT_GATEWAYS and agent.json)")
  .action(runAgent);

program.parseAsync().catch((err: unknown) => {
  if (err instanceof EnrollError) fail(err.message, 1);
  fail(err instanceof Error ? err.message : String(err), 1);
});
