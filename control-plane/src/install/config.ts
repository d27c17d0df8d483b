// Settings of the one-line agent install (install.sh and the agent bundles it downloads),
// parsed with the rest of the config at boot (config.ts calls this once). Every variable
// has its default here; docs/process-interfaces.md mirrors them.
import { resolve } from "node:path";
import { z } from "zod";

// From control-plane/{src,dist}/install/ to the repository: where `make build` puts them.
const REPO = resolve(__dirname, "..", "..", "..");

const schema = z.object({
  /**
   * Folder of the agent bundles served at /agent/... (scripts/agent-bundle.mjs writes
   * latest.json, the tarballs and their .sha256 files there). @default agent/dist/bundles
   * of this checkout
   */
  RELAYCTL_AGENT_BUNDLE_DIR: z
    .string()
    .min(1)
    .default(resolve(REPO, "agent", "dist", "bundles")),
  /**
   * Folder of the single-file CLI served at /cli/... (scripts/cli-bundle.mjs writes
   * latest.json, relayctl-<version>.cjs and its .sha256 there). @default cli/dist/bundles
   * of this checkout
   */
  RELAYCTL_CLI_BUNDLE_DIR: z
    .string()
    .min(1)
    .default(resolve(REPO, "cli", "dist", "bundles")),
  /**
   * The Ed25519 key that signs the agent bundles (install/signing.ts): base64 of a
   * 32-byte seed (openssl rand -base64 32). @default derived from the audit chain's key
   */
  RELAYCTL_AGENT_SIGNING_KEY: z
    .string()
    .trim()
    .refine((v) => /^[A-Za-z0-9+/]+={0,2}$/.test(v) && Buffer.from(v, "base64").length === 32, {
      error: "must be the base64 of exactly 32 bytes (openssl rand -base64 32)",
    })
    .optional(),
});

export interface InstallConfig {
  /** Absolute folder of latest.json and the bundles. */
  bundleDir: string;
  /** The installer served at /install.sh (deploy/install.sh of this checkout). */
  installerFile: string;
  /** Absolute folder of the CLI bundle's latest.json, file and checksum. */
  cliBundleDir: string;
  /** The CLI installer served at /cli/install.sh (cli/install.sh of this checkout). */
  cliInstallerFile: string;
  /** RELAYCTL_AGENT_SIGNING_KEY's seed; undefined: derived (install/signing.ts). */
  signingKey: Buffer | undefined;
}

/** Returns the settings, or the first problem as "VARIABLE: message". */
export function parseInstallConfig(raw: Record<string, unknown>): InstallConfig | string {
  const r = schema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0];
    return `${issue.path.join(".")}: ${issue.message}`;
  }
  return {
    bundleDir: resolve(r.data.RELAYCTL_AGENT_BUNDLE_DIR),
    installerFile: resolve(REPO, "deploy", "install.sh"),
    cliBundleDir: resolve(r.data.RELAYCTL_CLI_BUNDLE_DIR),
    cliInstallerFile: resolve(REPO, "cli", "install.sh"),
    signingKey: r.data.RELAYCTL_AGENT_SIGNING_KEY
      ? Buffer.from(r.data.RELAYCTL_AGENT_SIGNING_KEY, "base64")
      : undefined,
  };
}
