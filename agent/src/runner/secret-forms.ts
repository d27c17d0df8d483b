// The spellings of a secret the scrubber looks for (DESIGN.md "Operations":
// secrets are scrubbed at the source). A command rarely prints a secret only as
// itself: it lands in an Authorization header (base64), a URL (percent-encoded),
// a JSON document or a docker config.json (`auth` = base64 of "user:password").
//
// Covered, for each value:
// - raw;
// - base64, standard and URL-safe, with and without padding, on its own;
// - base64 of a longer payload that contains the value (see base64Fragments);
// - encodeURIComponent, its "+"-for-space variant, application/x-www-form-urlencoded
//   (URLSearchParams), each also with lower-case hex;
// - JSON string escaping as JSON.stringify writes it, and as Python (non-ASCII as
//   \uXXXX), PHP (also "\/") and Go (also <, >, & as \u003c...) write it.
// Not covered: base64 with line breaks inside the value's span (`base64` wraps at
// 76 columns), other encodings (hex, UTF-16, gzip, double encoding such as the
// base64 of a URL-encoded value), terminal escape sequences printed in the middle
// of a value, and a value printed in pieces.
import { Buffer } from "node:buffer";

/**
 * Values shorter than this (in UTF-16 code units) are never scrubbed: env values
 * like "1", "yes" or "prod" are settings, not secrets, and replacing every
 * occurrence of them would shred the output.
 */
export const MIN_SECRET_LENGTH = 4;

/** A base64 fragment shorter than this (36 bits) would turn up in unrelated base64 too often. */
const MIN_FRAGMENT_LENGTH = 6;

/**
 * Every spelling of `value` the scrubber removes; none if the value is too short.
 * A value with whitespace around it (a secret read from a file with its final
 * newline) is also looked for trimmed, as commands usually print it that way.
 */
export function secretForms(value: string): string[] {
  const forms = new Set<string>();
  for (const v of new Set([value, value.trim()])) {
    if (v.length < MIN_SECRET_LENGTH) continue;
    forms.add(v);
    for (const form of base64Forms(Buffer.from(v, "utf8"))) forms.add(form);
    for (const form of urlForms(v)) forms.add(form);
    for (const form of jsonForms(v)) forms.add(form);
  }
  return [...forms];
}

function base64Forms(bytes: Buffer): string[] {
  const padded = bytes.toString("base64");
  const bare = unpadded(padded);
  const forms = [padded, bare, toUrlSafe(padded), toUrlSafe(bare)];
  for (const fragment of base64Fragments(bytes)) forms.push(fragment, toUrlSafe(fragment));
  return forms;
}

/**
 * When the value sits inside a longer payload (`user:password`, a JSON document)
 * and the whole payload is base64-encoded, the value's bytes start at offset 0, 1
 * or 2 of a 3-byte group, and the characters at both ends of its span also carry
 * bits of the neighbouring bytes. For each offset this returns the run of
 * characters that depends on the value alone: everything but up to 3 characters
 * at the start and 1 at the end, so at most a few bits of the value (never a
 * whole byte) stay next to the `***`. A value under 5 bytes yields fragments
 * too short to be told from chance and is then caught in base64 only on its own.
 */
export function base64Fragments(bytes: Buffer): string[] {
  const fragments: string[] = [];
  for (const offset of [0, 1, 2]) {
    const length = offset + bytes.length;
    const encoded = unpadded(Buffer.concat([Buffer.alloc(offset), bytes]).toString("base64"));
    // offset 1: the 2nd character mixes a neighbour's bits; offset 2: the 3rd does.
    const start = [0, 2, 3][offset]!;
    // A final partial group: its last character mixes in the bytes that follow.
    const end = length % 3 === 0 ? encoded.length : encoded.length - 1;
    const fragment = encoded.slice(start, end);
    if (fragment.length >= MIN_FRAGMENT_LENGTH) fragments.push(fragment);
  }
  return fragments;
}

function unpadded(base64: string): string {
  return base64.replace(/=+$/, "");
}

function toUrlSafe(base64: string): string {
  return base64.replace(/\+/g, "-").replace(/\//g, "_");
}

function urlForms(value: string): string[] {
  let component: string;
  try {
    component = encodeURIComponent(value);
  } catch {
    return []; // a lone surrogate: no URL encoder would accept it either
  }
  const form = new URLSearchParams([["", value]]).toString().slice(1); // "=" + value
  const forms = [component, component.replace(/%20/g, "+"), form];
  return [...forms, ...forms.map((f) => f.replace(/%[0-9A-F]{2}/g, (hex) => hex.toLowerCase()))];
}

function jsonForms(value: string): string[] {
  const json = JSON.stringify(value).slice(1, -1);
  const ascii = json.replace(/[\u0080-\uffff]/g, unicodeEscape);
  return [json, ascii, ascii.replace(/\//g, "\\/"), json.replace(/[<>&]/g, unicodeEscape)];
}

/** One UTF-16 code unit as JSON's \uXXXX, lower-case hex as Python and Go write it. */
function unicodeEscape(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
}
