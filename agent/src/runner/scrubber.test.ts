import test from "ava";
import { REDACTED, Scrubber, SecretMatcher, scrubText } from "./scrubber.js";
import { seededRandom } from "../../../devkit/src/random.js";

// Has a space, "/", "+", a quote, a backslash, "<" and non-ASCII: every encoder
// below spells it differently from the raw value.
const SECRET = 'p@ss w/rd+"x\\<é';

const b64 = (s: string) => Buffer.from(s).toString("base64");

/** Feeds `text` to a fresh scrubber in pieces ending at `cuts`, returns the pieces' output. */
function streamed(secrets: SecretMatcher, text: string, cuts: number[]): string[] {
  const scrubber = new Scrubber(secrets);
  const pieces: string[] = [];
  let from = 0;
  for (const cut of [...cuts, text.length]) {
    pieces.push(scrubber.write(text.slice(from, cut)));
    from = cut;
  }
  pieces.push(scrubber.end());
  return pieces;
}

test("scrubber - raw, base64, URL-encoded and JSON-escaped forms are removed", (t) => {
  const secrets = new SecretMatcher([SECRET]);
  const planted = {
    raw: SECRET,
    base64: b64(SECRET),
    "base64 unpadded": b64(SECRET).replace(/=+$/, ""),
    base64url: Buffer.from(SECRET).toString("base64url"),
    encodeURIComponent: encodeURIComponent(SECRET),
    "URL with + for space": encodeURIComponent(SECRET).replace(/%20/g, "+"),
    "form-urlencoded": new URLSearchParams({ q: SECRET }).toString().slice(2),
    "lower-case percent hex": encodeURIComponent(SECRET).toLowerCase(),
    "JSON.stringify": JSON.stringify(SECRET).slice(1, -1),
    "JSON ASCII-only (Python)": JSON.stringify(SECRET).slice(1, -1).replace("é", "\\u00e9"),
    "JSON HTML-safe (Go)": JSON.stringify(SECRET).slice(1, -1).replace("<", "\\u003c"),
  };
  for (const [name, form] of Object.entries(planted)) {
    t.not(form, name === "raw" ? "" : SECRET, `${name} differs from the raw value`);
    t.is(scrubText(secrets, `before ${form} after\n`), "before *** after\n", name);
  }
  const json = JSON.stringify({ token: SECRET, url: `https://x/?t=${encodeURIComponent(SECRET)}` });
  t.is(scrubText(secrets, json), '{"token":"***","url":"https://x/?t=***"}');
});

test("scrubber - a secret base64-encoded inside a larger payload is removed at every alignment", (t) => {
  const secret = "registry-Passw0rd";
  const secrets = new SecretMatcher([secret]);
  for (let before = 0; before < 6; before++) {
    // "~" after the secret: the bits it adds to the last shared character are not
    // zero, so only characters made of the secret's bits alone can match.
    const encoded = b64(`${"u".repeat(before)}${secret}~}`);
    // Characters whose 6 bits all come from the secret's bytes; those around them mix in neighbours.
    const first = Math.ceil((8 * before) / 6);
    const last = Math.floor((8 * (before + secret.length) - 6) / 6);
    const expected = `${encoded.slice(0, first)}${REDACTED}${encoded.slice(last + 1)}`;
    t.is(scrubText(secrets, `auth: ${encoded}\n`), `auth: ${expected}\n`, `${before} bytes before`);
  }
  // The case that matters most: a docker config.json `auth`, base64 of "user:password".
  const auth = b64(`deploy-bot:${secret}`);
  t.false(scrubText(secrets, auth).includes(auth.slice(16, 36)));
  t.true(scrubText(secrets, auth).includes(REDACTED));
});

test("scrubber - a secret split across chunks at every position is removed", (t) => {
  const secrets = new SecretMatcher([SECRET, "second-secret-value"]);
  const text = `a${SECRET}b${b64(SECRET)}c"${JSON.stringify(SECRET)}"second-secret-value\n`;
  const whole = scrubText(secrets, text);
  t.is(whole, 'a***b***c""***""***\n');
  for (let cut = 0; cut <= text.length; cut++) {
    t.is(streamed(secrets, text, [cut]).join(""), whole, `cut at ${cut}`);
  }
  for (let cut = 0; cut + 3 <= text.length; cut++) {
    t.is(streamed(secrets, text, [cut, cut + 1, cut + 3]).join(""), whole, `cuts at ${cut}, +1, +3`);
  }
  const oneByOne = Array.from({ length: text.length }, (_, i) => i);
  t.is(streamed(secrets, text, oneByOne).join(""), whole, "one character at a time");
});

test("scrubber - streamed output equals scrubbing the whole text, for random texts and splits", (t) => {
  const alphabet = ["ab", "cd", "abcd", "cdab", "x", "\n", "é", "😀", "abab"];
  const secrets = new SecretMatcher(["abcd", "cdab", "dabc", "bcdabcd", "😀é😀"]);
  const next = seededRandom(42);
  for (let round = 0; round < 300; round++) {
    const parts = Array.from({ length: 5 + Math.floor(next() * 40) }, () => alphabet[Math.floor(next() * 9)]);
    const text = parts.join("");
    const cuts = Array.from({ length: Math.floor(next() * 8) }, () => Math.floor(next() * text.length));
    cuts.sort((a, b) => a - b);
    const pieces = streamed(secrets, text, cuts);
    t.is(pieces.join(""), scrubText(secrets, text), `round ${round}: ${JSON.stringify(text)} cut at ${cuts}`);
    for (const piece of pieces)
      t.false(/[\ud800-\udbff]$/.test(piece), "no piece ends in half a surrogate pair");
  }
});

test("scrubber - output without secrets is untouched byte for byte", (t) => {
  const next = seededRandom(7);
  const bytes = Buffer.from(Array.from({ length: 64 * 1024 }, () => Math.floor(next() * 256)));
  const text = `${bytes.toString("latin1")}\r\n${bytes.toString("base64")}\n${bytes.toString("utf8")}`;
  const secrets = new SecretMatcher(["not-in-the-text", "also absent!", SECRET]);
  const cuts = Array.from({ length: 50 }, (_, i) => Math.floor((text.length * i) / 50) + (i % 7));
  t.is(streamed(secrets, text, cuts).join(""), text);
  t.is(streamed(new SecretMatcher([]), text, cuts).join(""), text, "no secrets at all");
});

test("scrubber - a value with a final newline is also removed where it is printed without it", (t) => {
  const secrets = new SecretMatcher(["from-a-file\n", "  \n"]);
  t.is(scrubText(secrets, "key=from-a-file;\n  \n"), "key=***;\n  \n");
});

test("scrubber - values shorter than 4 characters are left alone", (t) => {
  const secrets = new SecretMatcher(["1", "yes", "on", "", "prod"]);
  t.is(scrubText(secrets, "1 yes on prod: eWVz\n"), "1 yes on ***: eWVz\n");
  t.true(new SecretMatcher(["1", "yes", ""]).empty);
});

test("scrubber - overlapping secrets become one *** and leave no tail", (t) => {
  const secrets = new SecretMatcher(["abcdXYZ", "XYZ12345", "token", "tokentoken-long"]);
  t.is(scrubText(secrets, "[abcdXYZ12345]"), "[***]");
  t.is(scrubText(secrets, "[tokentoken-long] [tokentoken]"), "[***] [******]");
  for (let cut = 0; cut <= 14; cut++) {
    t.is(streamed(secrets, "[abcdXYZ12345]", [cut]).join(""), "[***]", `cut at ${cut}`);
  }
});

test("scrubber - 200 secrets in a MiB of output are all found", (t) => {
  const values = Array.from({ length: 200 }, (_, i) => `secret-${i}-${"k".repeat(i % 40)}-end`);
  const secrets = new SecretMatcher(values);
  const line = "2024-01-01T00:00:00Z INFO request served in 12 ms, status 200, bytes 5120\n";
  const filler = line.repeat(Math.ceil(1_048_576 / line.length));
  const text = `${filler}${values[17]}\n${filler}${b64(values[199]!)}\n`;
  const started = performance.now();
  const cuts = Array.from({ length: 256 }, (_, i) => i * 8192);
  const out = streamed(secrets, text, cuts).join("");
  t.log(`${(text.length / 1_048_576).toFixed(1)} MiB in ${Math.round(performance.now() - started)} ms`);
  t.is(out, `${filler}***\n${filler}***\n`);
});
