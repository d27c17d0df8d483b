// Removes a job's secrets from its output as the output streams (DESIGN.md
// "Operations": secrets are scrubbed at the source). Which spellings of a value
// are removed, and which are not, is said in secret-forms.ts.
//
// Every occurrence of any form is replaced by `***`; occurrences that overlap
// (one secret inside another, or two sharing characters) become one `***`, so no
// tail of a longer secret survives a shorter one matched first. The values
// themselves are never logged or put in an error message.
import { MIN_SECRET_LENGTH, secretForms } from "./secret-forms.js";

export const REDACTED = "***";

// Forms are found through their first KEY code units (every form has at least
// MIN_SECRET_LENGTH), hashed: one hash and a bitmap probe per position of the
// output whatever the number of secrets, where one RegExp alternation of ~3000
// forms (200 values) is ~10x slower on a MiB of output.
const KEY = MIN_SECRET_LENGTH;
const BITMAP_BITS = 16;

/** The compiled forms of a job's secrets; shared by the scrubbers of its streams. */
export class SecretMatcher {
  readonly #byKey = new Map<number, string[]>();
  readonly #bitmap: Uint8Array;
  /** Length of the longest form, 0 when there is nothing to scrub. */
  readonly maxLength: number;

  constructor(values: Iterable<string>) {
    const forms = new Set<string>();
    for (const value of values) for (const form of secretForms(value)) forms.add(form);
    // Most runs have no secrets: do not pay for the bitmap then.
    this.#bitmap = new Uint8Array(forms.size > 0 ? 1 << BITMAP_BITS : 0);
    let max = 0;
    for (const form of forms) {
      const key = keyAt(form, 0);
      const bucket = this.#byKey.get(key);
      if (bucket) bucket.push(form);
      else this.#byKey.set(key, [form]);
      this.#bitmap[key & ((1 << BITMAP_BITS) - 1)] = 1;
      max = Math.max(max, form.length);
    }
    // Longest first, so the first form found at a position is the longest one there.
    for (const bucket of this.#byKey.values()) bucket.sort((a, b) => b.length - a.length);
    this.maxLength = max;
  }

  get empty(): boolean {
    return this.maxLength === 0;
  }

  /** Where the longest form starting at `at` in `text` ends, or -1 when none starts there. */
  matchEnd(text: string, at: number): number {
    if (at + KEY > text.length) return -1;
    const key = keyAt(text, at);
    if (!this.#bitmap[key & ((1 << BITMAP_BITS) - 1)]) return -1;
    for (const form of this.#byKey.get(key) ?? []) if (text.startsWith(form, at)) return at + form.length;
    return -1;
  }
}

function keyAt(text: string, at: number): number {
  let hash = 0;
  for (let i = at; i < at + KEY; i++) hash = (Math.imul(hash, 0x01000193) ^ text.charCodeAt(i)) | 0;
  return hash;
}

/**
 * Scrubs one stream of text fed in chunks. The output is exactly what scrubbing
 * the whole text at once gives (`scrubText`), also when a secret is split across
 * chunks: the last `maxLength - 1` characters of the text so far are held back
 * until more text or the end shows whether a secret starts in them.
 */
export class Scrubber {
  /** Text not yet scanned for the start of a secret. */
  #carry = "";
  /** The first #covered characters of #carry are inside a secret whose `***` was already emitted. */
  #covered = 0;

  constructor(readonly secrets: SecretMatcher) {}

  /** Returns the scrubbed text that is final so far (maybe less than was fed, maybe more). */
  write(text: string): string {
    if (this.secrets.empty) return text;
    return this.#scan(this.#carry + text, false);
  }

  /** The stream is over: returns the rest. */
  end(): string {
    if (this.secrets.empty) return "";
    return this.#scan(this.#carry, true);
  }

  #scan(text: string, final: boolean): string {
    // A secret starting before `safe` is wholly in `text`; one starting later may not be yet.
    let safe = final ? text.length : text.length - (this.secrets.maxLength - 1);
    // Never split a surrogate pair: the capped text counts UTF-8 bytes of each piece.
    if (!final && safe > 0 && isHighSurrogate(text.charCodeAt(safe - 1))) safe--;
    if (!final && safe <= 0) {
      this.#carry = text;
      return "";
    }
    let out = "";
    let resume = this.#covered; // plain text resumes here, after the current secret
    for (let at = 0; at < safe; at++) {
      const end = this.secrets.matchEnd(text, at);
      if (end < 0) continue;
      if (at < resume) {
        resume = Math.max(resume, end); // overlaps the secret being removed: one `***`
        continue;
      }
      out += text.slice(resume, at) + REDACTED;
      resume = end;
    }
    if (final) {
      this.#carry = "";
      this.#covered = 0;
      return out + text.slice(resume);
    }
    // A secret running past `safe` has had its `***`; the next scan skips its rest.
    this.#covered = Math.max(0, resume - safe);
    this.#carry = text.slice(safe);
    return out + text.slice(Math.min(resume, safe), safe);
  }
}

/** Scrubs a whole text at once. */
export function scrubText(secrets: SecretMatcher, text: string): string {
  const scrubber = new Scrubber(secrets);
  return scrubber.write(text) + scrubber.end();
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
