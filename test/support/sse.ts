/**
 * A text/event-stream body read as its blocks (the text between blank lines), as a client reads
 * them: `:` comments (heartbeats) included, an event's `event:` and `data:` lines left for the
 * caller. The body arrives in chunks that split blocks anywhere.
 */
export async function* sseBlocks(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<string> {
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    buffer += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let at: number;
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      yield buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
    }
  }
}

/** An event block's name (`message` without an `event:` line) and its one `data:` line. */
export function sseEvent(block: string): { event: string; data: string } {
  return { event: /^event: (.*)$/m.exec(block)?.[1] ?? 'message', data: /^data: (.*)$/m.exec(block)?.[1] ?? '' };
}
