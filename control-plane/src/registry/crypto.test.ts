import { randomBytes } from "node:crypto";
import test from "ava";
import { open, seal } from "./crypto.js";

const key = randomBytes(32);

test("crypto - sealed values open with the same key and never contain the plaintext", (t) => {
  const sealed = seal(key, "s3cret-päss");
  t.false(sealed.includes("s3cret"));
  t.false(Buffer.from(sealed, "base64").includes(Buffer.from("s3cret")));
  t.is(open(key, sealed), "s3cret-päss");
});

test("crypto - each seal has a fresh 12-byte IV (iv | tag | ciphertext)", (t) => {
  const a = Buffer.from(seal(key, "same"), "base64");
  const b = Buffer.from(seal(key, "same"), "base64");
  t.is(a.length, 12 + 16 + 4);
  t.notDeepEqual(a.subarray(0, 12), b.subarray(0, 12));
});

test("crypto - a wrong key or a tampered value fails instead of decrypting", (t) => {
  const sealed = seal(key, "value");
  t.throws(() => open(randomBytes(32), sealed));
  const raw = Buffer.from(sealed, "base64");
  raw[raw.length - 1] ^= 1;
  t.throws(() => open(key, raw.toString("base64")));
  t.throws(() => open(key, "c2hvcnQ="));
});
