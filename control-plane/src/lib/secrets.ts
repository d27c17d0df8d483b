// Token minting and hashing. Every bearer secret has a prefix that says what it
// is (rca_, rag_, rjt_ ...) followed by base62 randomness; only its SHA-256 is stored.
import { createHash, randomBytes } from "node:crypto";

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

export type TokenPrefix =
  | "rca_"
  | "rag_"
  | "rjt_"
  | "rds_"
  | "rck_"
  | "rco_"
  | "rcr_"
  | "rcs_"
  | "rin_"
  | "rdc_"
  | "rac_";

/** `prefix` + 40 base62 characters (~238 bits). Rejection sampling keeps it unbiased. */
export function mintToken(prefix: TokenPrefix, length = 40): string {
  let out = prefix;
  while (out.length < prefix.length + length) {
    for (const byte of randomBytes(64)) {
      if (byte < 248 && out.length < prefix.length + length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

export function sha256Hex(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}
