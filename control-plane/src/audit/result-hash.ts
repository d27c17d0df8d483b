// The hash of an operation's result, carried by its `operation.completed` audit
// event: the stored result (served beside the chain, not in it) can then be
// checked against the chain. sha256 over the canonical JSON of
// {status, exit_code, stdout, stderr, duration_ms}, with the strings as the
// database keeps them: UTF-8, so a lone surrogate (output cut inside a pair)
// is hashed as the U+FFFD it is stored as.
import { createHash } from "node:crypto";
import { canonicalJson } from "./audit-log.js";

export interface HashedResult {
  status: string;
  exit_code: number;
  stdout: string;
  stderr: string;
  duration_ms: number;
}

const asStored = (s: string) => Buffer.from(s, "utf8").toString("utf8");

export function resultHash(r: HashedResult): string {
  const canonical = canonicalJson({
    status: r.status,
    exit_code: Number(r.exit_code),
    stdout: asStored(r.stdout),
    stderr: asStored(r.stderr),
    duration_ms: Number(r.duration_ms),
  });
  return `sha256:${createHash("sha256").update(canonical).digest("hex")}`;
}
