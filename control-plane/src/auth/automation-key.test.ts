// The hash a presented automation key is looked up by is the one its row was stored with
// (lib/secrets.ts sha256Hex), whatever the token holds; a malformed or retired one is a 401.
import test from "ava";
import type { FastifyRequest } from "fastify";
import { RcError } from "../errors.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import { presentedKeyHash } from "./automation-key.js";

const withBearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } }) as FastifyRequest;

test("presented key hash - the stored hash of the token: minted keys and tokens with other characters", (t) => {
  for (const token of [
    mintToken("rca_"),
    mintToken("rca_"),
    "rca_abcDEF123",
    "rca_\u00e9\u00df\u4e2d\u{1F600}",
  ])
    t.is(presentedKeyHash(withBearer(token)), sha256Hex(token), token);
});

test("presented key hash - not an automation key, retired, or no bearer: 401", (t) => {
  for (const token of ["rck_abc", "rk_t_abc"])
    t.throws(() => presentedKeyHash(withBearer(token)), { instanceOf: RcError }, token);
  t.throws(() => presentedKeyHash({ headers: {} } as FastifyRequest), { instanceOf: RcError });
});
