import test from "ava";
import { CappedText, CrlfToLf, MarkerScanner, StreamCapture } from "./output-capture.js";
import { Scrubber, SecretMatcher } from "./scrubber.js";

const MARKER = "\x1fRCEND-abc-";

test("output capture - marker is found when split at every position", (t) => {
  const stream = `hello\r\nworld${MARKER}003\x1f\r\nafter`;
  for (let cut = 0; cut <= stream.length; cut++) {
    const capture = new StreamCapture("stdout", 1000, new MarkerScanner(MARKER, 4), true);
    capture.write(Buffer.from(stream.slice(0, cut)));
    capture.write(Buffer.from(stream.slice(cut)));
    t.is(capture.text(), "hello\nworld", `cut at ${cut}`);
    t.is(capture.marker.suffix, "003\x1f");
  }
});

test("output capture - a multi-byte character split across chunks is decoded whole", (t) => {
  const bytes = Buffer.from("é€😀\n");
  const capture = new StreamCapture("stderr", 1000, new MarkerScanner(MARKER, 4), false);
  for (const byte of bytes) capture.write(Buffer.from([byte]));
  capture.end();
  t.is(capture.text(), "é€😀\n");
});

test("output capture - held-back text is kept when the stream ends without a marker", (t) => {
  const capture = new StreamCapture("stdout", 1000, new MarkerScanner(MARKER, 4), true);
  capture.write(Buffer.from("partial\x1fRCE"));
  capture.end();
  t.is(capture.text(), "partial\x1fRCE");
});

test("output capture - pty CRLF becomes LF, also split across chunks, and a real CR survives", (t) => {
  const crlf = new CrlfToLf();
  t.is(crlf.feed("a\r") + crlf.feed("\nb\r\r\n") + crlf.feed("c\r") + crlf.flush(), "a\nb\r\nc\r");
});

test("output capture - cap keeps exactly cap bytes then the marker", (t) => {
  const capped = new CappedText("stdout", 10);
  capped.push("0123456");
  capped.push("789abc");
  capped.push("more");
  t.is(capped.text(), "0123456789\n[relayctl: stdout truncated at 10 bytes]\n");
});

test("output capture - cap never splits a multi-byte character", (t) => {
  const capped = new CappedText("stderr", 4);
  capped.push("abc€"); // € is 3 bytes: only "abc" fits
  t.is(capped.text(), "abc\n[relayctl: stderr truncated at 4 bytes]\n");
});

test("output capture - secrets are scrubbed before the cap, so a cut secret leaves no head", (t) => {
  const scrubber = new Scrubber(new SecretMatcher(["SECRETVALUE"]));
  const capture = new StreamCapture("stdout", 10, new MarkerScanner(MARKER, 4), true, scrubber);
  capture.write(Buffer.from("abcdefgSECR"));
  capture.write(Buffer.from(`ETVALUE and more${MARKER}000\x1f`));
  t.is(capture.text(), "abcdefg***\n[relayctl: stdout truncated at 10 bytes]\n");
});

test("output capture - a secret right before the end marker is scrubbed and the marker still found", (t) => {
  const scrubber = new Scrubber(new SecretMatcher(["SECRETVALUE", `x${MARKER}`]));
  const capture = new StreamCapture("stdout", 1000, new MarkerScanner(MARKER, 4), true, scrubber);
  t.false(capture.write(Buffer.from("out SECRETVALU")));
  t.true(capture.write(Buffer.from(`E\r\nx${MARKER}007\x1f`)));
  t.is(capture.marker.suffix, "007\x1f");
  t.is(capture.text(), "out ***\nx");
});

test("output capture - a live follower gets each piece as it comes, holding back only a possible marker start", (t) => {
  const seen: string[] = [];
  const capture = new StreamCapture("stdout", 1000, new MarkerScanner(MARKER, 4), true, undefined, (s) =>
    seen.push(s),
  );
  capture.write(Buffer.from("one\r\n"));
  t.deepEqual(seen, ["one\n"], "a short line is not held back waiting for more");
  capture.write(Buffer.from("two\r\n\x1fRC"));
  t.deepEqual(seen, ["one\n", "two\n"], "what may begin the marker waits");
  capture.write(Buffer.from("END-abc-003\x1f"));
  t.deepEqual(seen, ["one\n", "two\n"]);
  t.is(capture.text(), "one\ntwo\n");
  t.is(capture.marker.suffix, "003\x1f");
});
