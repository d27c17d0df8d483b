import test from "ava";
import { ipAllowed, parseAllowlistEntry } from "./ip-allowlist.js";

test("ip allowlist - parses addresses and CIDR ranges, refuses the rest", (t) => {
  t.deepEqual(parseAllowlistEntry("10.0.0.0/8"), { address: "10.0.0.0", prefix: 8, family: "ipv4" });
  t.deepEqual(parseAllowlistEntry("2001:db8::1"), { address: "2001:db8::1", prefix: 128, family: "ipv6" });
  for (const bad of [
    "",
    "10.0.0.0/33",
    "2001:db8::/129",
    "example.com",
    "10.0.0.1/8/1",
    "10.0.0/8",
    "1.2.3.4/x",
  ])
    t.is(parseAllowlistEntry(bad), null, bad);
});

test("ip allowlist - matches IPv4, IPv6 and IPv4-mapped callers", (t) => {
  t.true(ipAllowed([], "203.0.113.9"));
  t.true(ipAllowed(["10.0.0.0/8"], "10.1.2.3"));
  t.true(ipAllowed(["10.0.0.0/8"], "::ffff:10.1.2.3"));
  t.false(ipAllowed(["10.0.0.0/8"], "11.0.0.1"));
  t.true(ipAllowed(["2001:db8::/32"], "2001:db8:1::5"));
  t.false(ipAllowed(["2001:db8::/32"], "2001:db9::5"));
  t.true(ipAllowed(["127.0.0.1"], "127.0.0.1"));
  t.false(ipAllowed(["127.0.0.1"], "not-an-ip"));
});
