/**
 * llama-server reports a failure inside a stream that has already begun (HTTP 200 sent) as a
 * final event and then closes the stream. Over its versions that event has had three shapes:
 *
 *   data: {"error":{"code":500,"message":"…","type":"server_error"}}   current
 *   error: {"error":{…}}  /  error: {…}                                 older versions
 *   event: error + data: {…} (no "error" key)                          Anthropic-style framing
 *
 * The `openai` backend's stream reader (openai-http.ts) raises the first as an error. The second is
 * not an SSE field: a parser that follows the spec drops it silently and the stream just ends,
 * hiding the failure. The third it would yield as if it were a chunk. `llamaSseFraming` tells that
 * reader to take the last two as the first; `normalizeLlamaSse` does the same rewrite on an SSE
 * byte stream (for readers that only see bytes), passing everything else through byte for byte.
 */
import type { SseFraming } from './openai-http.ts';

/** The `data:` payload of an error event: always a JSON object with an `error` key. */
export function asErrorData(value: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return JSON.stringify({ error: { message: value } });
  }
  if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
    return 'error' in parsed ? value : JSON.stringify({ error: parsed });
  }
  return JSON.stringify({ error: { message: typeof parsed === 'string' ? parsed : value } });
}

/** A line-level rewriter of an SSE byte stream (see the file comment). */
export function normalizeLlamaSse(): TransformStream<Uint8Array, Uint8Array> {
  const dec = new TextDecoder();
  const enc = new TextEncoder();
  let pending = '';
  let inErrorEvent = false;

  /** One line without its "\n"; null drops it. */
  const rewrite = (line: string): string | null => {
    const l = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (l === '') {
      inErrorEvent = false;
      return line;
    }
    if (l.startsWith('error:')) return `data: ${asErrorData(l.slice('error:'.length).trim())}`;
    if (l.startsWith('event:')) {
      if (l.slice('event:'.length).trim() === 'error') {
        inErrorEvent = true;
        return null;
      }
      return line;
    }
    if (inErrorEvent && l.startsWith('data:')) return `data: ${asErrorData(l.slice('data:'.length).trim())}`;
    return line;
  };

  const push = (text: string, controller: TransformStreamDefaultController<Uint8Array>, final: boolean): void => {
    pending += text;
    let out = '';
    for (let i = pending.indexOf('\n'); i !== -1; i = pending.indexOf('\n')) {
      const r = rewrite(pending.slice(0, i));
      pending = pending.slice(i + 1);
      if (r !== null) out += `${r}\n`;
    }
    if (final && pending !== '') {
      const r = rewrite(pending);
      pending = '';
      // A last event without its blank line: complete it, so the reader still sees it.
      if (r !== null) out += `${r}\n\n`;
    }
    if (out !== '') controller.enqueue(enc.encode(out));
  };

  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      const text = dec.decode(chunk, { stream: true });
      // Fast path: whole lines, nothing that could be an error event.
      if (pending === '' && !inErrorEvent && text.endsWith('\n') && !text.includes('error')) {
        controller.enqueue(chunk);
        return;
      }
      push(text, controller, false);
    },
    flush(controller) {
      push(dec.decode(), controller, true);
    },
  });
}

/** llama-server's error framings for the event-level reader (see the file comment). */
export const llamaSseFraming: SseFraming = {
  // `event: error` + `data: {…}`: the data, with an "error" key
  event: (ev) => (ev.event === 'error' ? asErrorData(ev.data.trim()) : ev.data),
  // `error: {…}`: an error event of its own
  unknownField: (field, value) => (field === 'error' ? asErrorData(value.trim()) : null),
};
