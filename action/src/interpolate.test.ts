import test from "ava";
import { interpolate } from "./interpolate.js";

const env = { SET: "v", EMPTY: "" };
const one = (text: string) => interpolate(text, env, "x");

test("interpolate - the forms Compose knows", (t) => {
  t.is(one("a-$SET-${SET}"), "a-v-v");
  t.is(one("${MISSING}"), "");
  t.is(one("${EMPTY:-d}|${EMPTY-d}|${MISSING-d}"), "d||d");
  t.is(one("${SET:+alt}|${EMPTY:+alt}|${EMPTY+alt}|${MISSING+alt}"), "alt||alt|");
  t.is(one("price $$5"), "price $5");
  t.is(one("${EMPTY?needed}"), "");
});

test("interpolate - required variables and bad syntax fail with the place", (t) => {
  t.throws(() => interpolate({ image: "${EMPTY:?say why}" }, env, "services.web"), {
    message: "services.web.image: required variable EMPTY is missing: say why",
  });
  t.throws(() => one("${1BAD}"), { message: /invalid interpolation/ });
});

test("interpolate - strings inside lists and mappings, not keys or numbers", (t) => {
  t.deepEqual(interpolate({ $SET: ["$SET", 1, true, null] }, env, "x"), { $SET: ["v", 1, true, null] });
});
