import test from "ava";
import { RcError } from "../errors.js";
import { DEFAULT_PREVIEWS, mergePreviewSettings, previewHost, previewSettings } from "./settings.js";

const detailOf = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    if (err instanceof RcError) return `${err.status} ${err.detail}`;
    throw err;
  }
  return "no error";
};

test("preview settings - defaults under what is stored, and a change merges into them", (t) => {
  t.deepEqual(previewSettings(null), DEFAULT_PREVIEWS);
  const stored = mergePreviewSettings(null, { enabled: true, max: 2 });
  t.like(previewSettings(stored), { enabled: true, max: 2, allow_forks: false, copy_secrets: false });
  t.like(previewSettings(mergePreviewSettings(stored, { allow_forks: true })), {
    enabled: true,
    max: 2,
    allow_forks: true,
  });
});

test("preview settings - the domain pattern must give each preview its own domain name (422 naming the field)", (t) => {
  for (const bad of [
    "preview.{app}.example.com",
    "pr-{nummer}.example.com",
    "*.{key}.example.com",
    "pr_{number}..example.com",
    "{key}",
  ])
    t.regex(
      detailOf(() => mergePreviewSettings(null, { domain_pattern: bad })),
      /^422 previews\.domain_pattern/,
      bad,
    );
  const ok = previewSettings(
    mergePreviewSettings(null, { domain_pattern: "PR-{number}.{app}.Preview.Example.com" }),
  );
  t.is(ok.domain_pattern, "pr-{number}.{app}.preview.example.com");
});

test("preview settings - the hostname: {number} (the key without one), {key} and {app} as a DNS label", (t) => {
  const s = previewSettings(mergePreviewSettings(null, { domain_pattern: "pr-{number}.{app}.preview.test" }));
  const parent = { name: "My Web_App", id: "00000000-0000-0000-0000-000000000001" };
  t.is(previewHost(s, parent, "pr-12", 12), "pr-12.my-web-app.preview.test");
  t.is(previewHost(s, parent, "ci", null), "pr-ci.my-web-app.preview.test");
  t.is(previewHost(previewSettings(null), parent, "pr-12", 12), null);
});
