// Text capture for one output stream of a run. Bytes are decoded with a
// StringDecoder (a multi-byte character may be split across chunks), an end marker
// is looked for across chunk boundaries, the job's secrets are scrubbed, and what
// is kept is capped in bytes so a chatty command cannot grow the agent's memory:
// past the cap we keep reading (to find the marker) but stop buffering.
import { StringDecoder } from "node:string_decoder";
import type { Scrubber } from "./scrubber.js";

/** Finds `prefix` followed by `suffixLength` more characters in a chunked text stream. */
export class MarkerScanner {
  #carry = "";
  /** The `suffixLength` characters after the prefix, once the marker has been seen. */
  suffix: string | undefined;

  constructor(
    readonly prefix: string,
    readonly suffixLength: number,
  ) {}

  /** Returns the text that is certainly before the marker; nothing once the marker was seen. */
  feed(chunk: string): string {
    if (this.suffix !== undefined) return "";
    const text = this.#carry + chunk;
    const at = text.indexOf(this.prefix);
    const end = at + this.prefix.length + this.suffixLength;
    if (at >= 0 && text.length >= end) {
      this.suffix = text.slice(at + this.prefix.length, end);
      this.#carry = "";
      return text.slice(0, at);
    }
    // Hold back what may be the start of a marker split across chunks: only an end
    // of the text that begins the prefix, so output reaches a live follower at once.
    const keep = at >= 0 ? text.length - at : this.#partialPrefix(text);
    this.#carry = text.slice(text.length - keep);
    return text.slice(0, text.length - keep);
  }

  /** The length of the longest end of `text` that is a start of the prefix (shorter than it). */
  #partialPrefix(text: string): number {
    const first = this.prefix[0]!;
    for (
      let i = text.indexOf(first, Math.max(0, text.length - this.prefix.length + 1));
      i >= 0;
      i = text.indexOf(first, i + 1)
    ) {
      if (this.prefix.startsWith(text.slice(i))) return text.length - i;
    }
    return 0;
  }

  /** The held-back text, when the stream ended without a marker. */
  flush(): string {
    const rest = this.#carry;
    this.#carry = "";
    return rest;
  }
}

/** Undoes the pty's onlcr ("\n" → "\r\n"), also when the pair is split across chunks. */
export class CrlfToLf {
  #pendingCr = false;

  feed(chunk: string): string {
    let text = this.#pendingCr ? `\r${chunk}` : chunk;
    this.#pendingCr = text.endsWith("\r");
    if (this.#pendingCr) text = text.slice(0, -1);
    return text.includes("\r") ? text.replace(/\r\n/g, "\n") : text;
  }

  flush(): string {
    const rest = this.#pendingCr ? "\r" : "";
    this.#pendingCr = false;
    return rest;
  }
}

/** Keeps at most `capBytes` bytes of text, then a truncation marker. */
export class CappedText {
  #parts: string[] = [];
  #bytes = 0;
  #truncated = false;

  constructor(
    readonly stream: "stdout" | "stderr",
    readonly capBytes: number,
  ) {}

  /** True once the cap was reached: nothing more is kept. */
  get full(): boolean {
    return this.#truncated;
  }

  push(text: string): void {
    if (this.#truncated || text.length === 0) return;
    const size = Buffer.byteLength(text);
    if (this.#bytes + size <= this.capBytes) {
      this.#parts.push(text);
      this.#bytes += size;
      return;
    }
    this.#parts.push(cutToBytes(text, this.capBytes - this.#bytes));
    this.#bytes = this.capBytes;
    this.#truncated = true;
  }

  text(): string {
    const body = this.#parts.join("");
    if (!this.#truncated) return body;
    return `${body}\n[relayctl: ${this.stream} truncated at ${this.capBytes} bytes]\n`;
  }
}

/** The longest prefix of `text` that fits in `bytes` UTF-8 bytes without splitting a character. */
function cutToBytes(text: string, bytes: number): string {
  const buf = Buffer.from(text);
  let end = bytes;
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return buf.toString("utf8", 0, end);
}

/**
 * bytes → text → (marker scan) → (CRLF fix) → (scrub) → capped text: one output
 * stream of a run.
 *
 * The order is what makes it safe. The marker is looked for before scrubbing, so a
 * `***` can never make or break it. Scrubbing comes after the CRLF fix, so a
 * multi-line secret reads as it was handed to us ("\n", not the pty's "\r\n").
 * And it comes before the cap: the cap cuts at a byte count, so a secret running
 * across the cut would be left as a head no form matches any more, and scrubbing
 * after the cap would leak that head. Scrubbed first, the cut falls in text that
 * is final, at worst through a `***`. Past the cap nothing is kept, so nothing is
 * scrubbed either: a huge output costs the scan only for its first cap bytes.
 */
export class StreamCapture {
  readonly #decoder = new StringDecoder("utf8");
  readonly #crlf: CrlfToLf | undefined;
  readonly #out: CappedText;

  constructor(
    stream: "stdout" | "stderr",
    capBytes: number,
    readonly marker: MarkerScanner,
    fromPty: boolean,
    /** Removes the job's secrets; none: the text is kept as it is. */
    readonly scrubber?: Scrubber,
    /** Each piece of text as it is kept (scrubbed, within the cap): a live follower's. */
    readonly onText?: (text: string) => void,
  ) {
    this.#out = new CappedText(stream, capBytes);
    this.#crlf = fromPty ? new CrlfToLf() : undefined;
  }

  /** Feeds raw bytes; returns true once the end marker has been seen. */
  write(chunk: Buffer): boolean {
    this.#keep(this.marker.feed(this.#decoder.write(chunk)));
    if (this.marker.suffix === undefined) return false;
    this.#close();
    return true;
  }

  /** The stream ended without a marker: keep everything that was held back. */
  end(): void {
    this.#keep(this.marker.feed(this.#decoder.end()) + this.marker.flush());
    this.#close();
  }

  text(): string {
    return this.#out.text();
  }

  #keep(text: string): void {
    if (this.#out.full) return;
    const lf = this.#crlf ? this.#crlf.feed(text) : text;
    this.#push(this.scrubber ? this.scrubber.write(lf) : lf);
  }

  #push(text: string): void {
    this.#out.push(text);
    if (text && this.onText) this.onText(text);
  }

  /** Nothing more will come: push what the CRLF fix and the scrubber held back. */
  #close(): void {
    if (this.#out.full) return;
    // A lone "\r" just before the marker is output, not half of a pty "\r\n".
    const rest = this.#crlf ? this.#crlf.flush() : "";
    this.#push(this.scrubber ? this.scrubber.write(rest) + this.scrubber.end() : rest);
  }
}
