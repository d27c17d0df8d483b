import test from "ava";
import { z } from "zod";
import { validationMessage } from "./validation.js";

const firstIssue = (schema: z.ZodType, value: unknown) => {
  const r = schema.safeParse(value);
  if (r.success) throw new Error("expected a refusal");
  return r.error.issues[0]!;
};

test("validation - a pattern with the route's own words reads in those words", (t) => {
  const slug = z.string().regex(/^[a-z0-9-]+$/, { error: "must be a slug: a-z, 0-9 and '-'" });
  t.is(validationMessage(firstIssue(slug, "Bad Name")), "must be a slug: a-z, 0-9 and '-'");
});

test("validation - a pattern without words names the pattern, as ajv did", (t) => {
  const bare = z.string().regex(/^\d+$/);
  t.is(validationMessage(firstIssue(bare, "x")), 'must match pattern "^\\d+$"');
});
