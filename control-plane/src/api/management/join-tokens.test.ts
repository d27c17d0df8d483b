import test from "ava";
import { shellWord } from "./join-tokens.js";

test("join tokens - a base URL with shell characters is quoted in the commands", (t) => {
  t.is(shellWord("https://relay.example.com:8443"), "https://relay.example.com:8443");
  t.is(shellWord("http://a b'$(x)"), `'http://a b'\\''$(x)'`);
});
