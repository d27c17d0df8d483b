// The signature of the agent bundles (issue 30, finding 11). The installer's
// checksum comes from the same server as the bundle, so a tampered mirror or
// cache that also rewrites /agent/latest would pass it. The control plane
// therefore signs, with an Ed25519 key only it holds, one line per bundle:
//
//   relayctl-agent-bundle v1 <file name> <sha256 of the file>\n
//
// and the join token's install command pins the public key (--signing-key), so
// install.sh checks the download against the key it was given before it unpacks
// or runs anything. The key, first match wins:
//   1. RELAYCTL_AGENT_SIGNING_KEY: base64 of a 32-byte Ed25519 seed (to keep the
//      key when the audit key changes, or to share one across installations);
//   2. derived from the audit chain's key (audit/chain-key.ts, HKDF-SHA256 with
//      the label below): every control plane has one, kept outside the database
//      (RELAYCTL_AUDIT_HMAC_KEY, the SQLite key file, or RELAYCTL_MASTER_KEY), so
//      every api instance of an installation signs with the same key, unset.
import { type KeyObject, createPrivateKey, createPublicKey, hkdfSync, sign } from "node:crypto";
import { resolveAuditKeys } from "../audit/chain-key.js";
import type { Config } from "../config.js";

const LABEL = "relayctl agent bundle signing v1";
/** PKCS#8 DER of an Ed25519 private key, up to its 32-byte seed (RFC 8410). */
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

export interface BundleSigner {
  /** The public key as install.sh takes it: base64 of its SubjectPublicKeyInfo DER (44 bytes). */
  publicKey: string;
  /** base64 of the Ed25519 signature of the bundle's statement. */
  sign(file: string, sha256: string): string;
}

/** The line a bundle's signature covers. */
export function bundleStatement(file: string, sha256: string): string {
  return `relayctl-agent-bundle v1 ${file} ${sha256}\n`;
}

function seedOf(config: Config): Buffer {
  if (config.install.signingKey) return config.install.signingKey;
  const audit = resolveAuditKeys(config);
  // serve() refuses to start without an audit key, so this is a broken setup, not a state.
  if (!audit) throw new Error("no key to sign agent bundles with (no audit key)");
  return Buffer.from(hkdfSync("sha256", audit.chain, Buffer.alloc(0), LABEL, 32));
}

export function bundleSigner(config: Config): BundleSigner {
  const key: KeyObject = createPrivateKey({
    key: Buffer.concat([PKCS8_PREFIX, seedOf(config)]),
    format: "der",
    type: "pkcs8",
  });
  const publicKey = createPublicKey(key).export({ format: "der", type: "spki" }).toString("base64");
  return {
    publicKey,
    sign: (file, sha256) => sign(null, Buffer.from(bundleStatement(file, sha256)), key).toString("base64"),
  };
}

/** The script with its `signing_key='...'  # @agent-signing-key` line set to the public key. */
export function fillSigningKey(script: string, publicKey: string): string {
  return script.replace(/^signing_key='[^'\n]*'(?= {2}# @agent-signing-key)/m, `signing_key='${publicKey}'`);
}
