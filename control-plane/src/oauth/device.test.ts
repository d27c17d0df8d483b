import test from "ava";
import { safeNext } from "../accounts/web-routes.js";
import { USER_CODE_ALPHABET, displayUserCode, normalizeUserCode } from "./device.js";

test("device - user codes are typed forgivingly: case, dash and spaces do not matter", (t) => {
  t.is(normalizeUserCode("bcdf-ghjk"), "BCDFGHJK");
  t.is(normalizeUserCode(" BCDF GHJK "), "BCDFGHJK");
  t.is(displayUserCode("BCDFGHJK"), "BCDF-GHJK");
});

test("device - a code with a vowel, a digit or the wrong length is no code", (t) => {
  t.is(normalizeUserCode("BCDF-GHJA"), null);
  t.is(normalizeUserCode("BCDF-GHJ1"), null);
  t.is(normalizeUserCode("BCDF-GHJ"), null);
  t.is(normalizeUserCode("BCDF-GHJKL"), null);
  // RFC 8628 §6.1: no vowels (no words) and none of the look-alikes 0/O, 1/I/L... beyond L.
  for (const c of "AEIOUY0123456789") t.false(USER_CODE_ALPHABET.includes(c));
  t.is(USER_CODE_ALPHABET.length, 20);
});

test("login - next= is a path of this site, never another host", (t) => {
  t.is(safeNext("/device?user_code=BCDF-GHJK"), "/device?user_code=BCDF-GHJK");
  t.is(safeNext("//evil.example/x"), "/account");
  t.is(safeNext("/\\evil.example"), "/account");
  t.is(safeNext("https://evil.example"), "/account");
  t.is(safeNext(undefined), "/account");
});
