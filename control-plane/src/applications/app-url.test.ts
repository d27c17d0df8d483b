import test from "ava";
import { type AppsUrl, appLabel, applicationUrls, parseAppsUrl, templateHostname, urlOf } from "./app-url.js";
import { loadConfig } from "../config.js";

const ID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const parsed = (v: string) => parseAppsUrl(v) as AppsUrl;

test("apps url - the dev and production templates parse", (t) => {
  t.deepEqual(parseAppsUrl("http://{app}.localhost:8000"), {
    template: "http://{app}.localhost:8000",
    scheme: "http",
    domain: "localhost",
    port: "8000",
  });
  t.like(parseAppsUrl("https://{app}.Apps.Example.com/"), {
    scheme: "https",
    domain: "apps.example.com",
    port: "",
  });
  // The scheme's own port is left out of URLs.
  t.like(parseAppsUrl("https://{app}.apps.example.com:443"), { port: "" });
  t.like(parseAppsUrl("http://{app}.apps.example.com:80"), { port: "" });
});

test("apps url - templates that cannot give every application a hostname are refused", (t) => {
  for (const bad of [
    "http://apps.example.com/{app}", // a path: routes are by host
    "http://apps.example.com", // no {app}: every application the same host
    "http://x{app}.example.com", // {app} inside a label
    "http://{app}-x.example.com",
    "ftp://{app}.example.com",
    "{app}.example.com", // no scheme
    "http://{app}.example.com:0",
    "http://{app}.example.com:70000",
    "http://{app}.exa_mple.com",
    "http://{app}.{app}.example.com",
    "http://user@{app}.example.com",
    "http://{app}.example.com?x=1",
  ]) {
    const out = parseAppsUrl(bad);
    t.is(typeof out, "string", bad);
  }
  t.regex(parseAppsUrl("http://apps.example.com/{app}") as string, /^must be http\(s\):\/\/\{app\}\./);
});

test("apps url - a bad template is one config line (serve exits 2 on it)", (t) => {
  const err = t.throws(() =>
    loadConfig({ RELAYCTL_DATABASE_URL: "sqlite:///tmp/x.db", RELAYCTL_APPS_URL: "http://{app}" }),
  );
  t.regex(String(err?.message), /^RELAYCTL_APPS_URL: /);
  t.false(String(err?.message).includes("\n"));
  const ok = loadConfig({ RELAYCTL_DATABASE_URL: "sqlite:///tmp/x.db" });
  t.is(ok.appsUrl, undefined, "unset by default");
});

test("apps url - a name becomes one DNS label", (t) => {
  t.is(appLabel("web", ID), "web");
  t.is(appLabel("My App_2", ID), "my-app-2");
  t.is(appLabel("--Shop  (EU)--", ID), "shop-eu");
  t.is(appLabel("café.menu", ID), "caf-menu");
  // Nothing usable: the id's start keeps it a label.
  t.is(appLabel("!!!", ID), "app-0f1e2d3c");
  t.is(appLabel("ÄÖÜ", ID), "app-0f1e2d3c");
  // At most 63 characters, never ending in '-' after the cut.
  const long = `${"a".repeat(62)}-b${"c".repeat(10)}`;
  t.is(appLabel(long, ID), "a".repeat(62));
  t.true(appLabel("x".repeat(300), ID).length === 63);
});

test("apps url - hostname and URLs of an application", (t) => {
  const dev = parsed("http://{app}.localhost:8000");
  t.is(templateHostname(dev, { name: "My App", id: ID }), "my-app.localhost");
  t.is(urlOf(dev, "my-app.localhost"), "http://my-app.localhost:8000");
  t.is(urlOf(undefined, "shop.example.com"), "https://shop.example.com");
  t.deepEqual(applicationUrls(dev, "my-app.localhost", ["*.shop.test", "shop.test"]), {
    url: "http://my-app.localhost:8000",
    urls: ["http://my-app.localhost:8000", "http://shop.test:8000"],
  });
  t.deepEqual(applicationUrls(undefined, null, ["b.example.com", "a.example.com"]), {
    url: "https://b.example.com",
    urls: ["https://b.example.com", "https://a.example.com"],
  });
  t.deepEqual(applicationUrls(undefined, null, []), { url: null, urls: [] });
  // A hostname past 253 characters is no hostname.
  const deep = parsed(`https://{app}.${"d".repeat(60)}.${"e".repeat(60)}.${"f".repeat(60)}.example.com`);
  t.is(templateHostname(deep, { name: "x".repeat(63), id: ID }), undefined);
});
