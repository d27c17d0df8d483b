// A server-sent events reader the way a CLI follows a deployment's live log:
// GET with the key, read `event:` / `data:` blocks as they arrive (the time each
// arrived is kept, so a test can tell live events from a replay) until the
// server closes the stream.
export interface SseEvent {
  event: string;
  data: string;
  /** Date.now() when the event's blank line arrived. */
  receivedAt: number;
}

export interface SseStream {
  status: number;
  contentType: string;
  events: SseEvent[];
  /** Body text when the answer was not an event stream (an error). */
  text: string;
}

function parseBlock(block: string): Omit<SseEvent, "receivedAt"> | undefined {
  let event = "message";
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  return data.length === 0 && event === "message" ? undefined : { event, data: data.join("\n") };
}

/** Reads url to its end (or timeoutMs); onEvent sees each event as it arrives. */
export async function readSse(
  url: string,
  headers: Record<string, string>,
  timeoutMs: number,
  onEvent?: (e: SseEvent) => void,
): Promise<SseStream> {
  const res = await fetch(url, {
    headers: { accept: "text/event-stream", ...headers },
    signal: AbortSignal.timeout(timeoutMs),
  });
  const contentType = res.headers.get("content-type") ?? "";
  if (!contentType.startsWith("text/event-stream") || !res.body) {
    return { status: res.status, contentType, events: [], text: await res.text() };
  }
  const events: SseEvent[] = [];
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true }).replace(/\r\n?/g, "\n");
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const parsed = parseBlock(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (parsed) {
        const e = { ...parsed, receivedAt: Date.now() };
        events.push(e);
        onEvent?.(e);
      }
      end = buffer.indexOf("\n\n");
    }
  }
  return { status: res.status, contentType, events, text: "" };
}
