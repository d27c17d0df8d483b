// Looking for a planted secret where it must not be: the forms a leaked value
// could take (raw, base64, hex) searched in text, and the regular files of a
// directory (FIFOs skipped: the agent keeps its stderr FIFOs in its state dir, and
// reading one with no writer blocks forever). Used by secrets-audit.test.ts (exec's
// env) and deploy-secrets.test.ts (deployment env, git and registry passwords).
import { randomBytes } from "node:crypto";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import type { ExecutionContext } from "ava";

/** A value no test output would contain by chance: prefix + 24 hex digits (32 characters by default). */
export function plantSecret(prefix = "rcsecret"): string {
  return `${prefix}${randomBytes(12).toString("hex")}`;
}

export function leakForms(value: string): string[] {
  const b = Buffer.from(value);
  return [value, b.toString("base64").replace(/=+$/, ""), b.toString("hex")];
}

/** Asserts none of the secrets appears in haystack in any of its forms. */
export function assertAbsent(t: ExecutionContext, haystack: string, secrets: string[], where: string): void {
  for (const s of secrets) {
    for (const form of leakForms(s)) t.false(haystack.includes(form), `${where} contains ${s} (as ${form})`);
  }
}

/** Every regular file under dir, recursively (FIFOs and sockets skipped). */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = statSync(path);
    if (st.isDirectory()) out.push(...filesUnder(path));
    else if (st.isFile()) out.push(path);
  }
  return out;
}

/** The bytes of every regular file under dir, each as latin1 text with its path. */
export function filesText(dir: string, filter: (path: string) => boolean = () => true): [string, string][] {
  return filesUnder(dir)
    .filter(filter)
    .map((f) => [f, readFileSync(f).toString("latin1")]);
}
