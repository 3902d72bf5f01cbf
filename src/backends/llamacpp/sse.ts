/**
 * llama-server reports a failure inside a stream that has already begun (HTTP 200 sent) as a
 * final event and then closes the stream. Over its versions that event has had three shapes:
 *
 *   data: {"error":{"code":500,"message":"…","type":"server_error"}}   current
 *   error: {"error":{…}}  /  error: {…}                                 older versions
 *   event: error + data: {…} (no "error" key)                          Anthropic-style framing
 *
 * The `openai` backend's stream reader (backends/upstream/client.ts) raises the first as an error. The second is
 * not an SSE field: a parser that follows the spec drops it silently and the stream just ends,
 * hiding the failure. The third it would yield as if it were a chunk. `llamaSseFraming` tells that
 * reader to take the last two as the first.
 */
import type { SseFraming } from '../upstream/types.ts';

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

/** llama-server's error framings for the event-level reader (see the file comment). */
export const llamaSseFraming: SseFraming = {
  // `event: error` + `data: {…}`: the data, with an "error" key
  event: (ev) => (ev.event === 'error' ? asErrorData(ev.data.trim()) : ev.data),
  // `error: {…}`: an error event of its own
  unknownField: (field, value) => (field === 'error' ? asErrorData(value.trim()) : null),
};
