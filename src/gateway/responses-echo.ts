/**
 * What an answer says of the request that the gateway changed on its way to a native backend.
 * The gateway expands `previous_response_id` itself and sends the conversation instead, so a
 * native upstream answers `"previous_response_id": null`; the client gets back the id it sent, in
 * the JSON answer and in every event that carries the whole response, as a translated answer has
 * it. Only requests that named a previous response pay for this (a parse of the few events that
 * carry the response; the deltas pass untouched).
 */
import { EventPart } from '../protocol/stream-part.ts';

/** The events whose data is `{…, "response": Response}`. */
const RESPONSE_EVENTS: ReadonlySet<string> = new Set([
  'response.created',
  'response.in_progress',
  'response.queued',
  'response.completed',
  'response.incomplete',
  'response.failed',
]);

/** `answer` (a Response) itself when it names `id` as its previous response, else a copy that does. */
export function echoPreviousId<T extends object>(answer: T, id: string): T {
  return (answer as { previous_response_id?: unknown }).previous_response_id === id ? answer : { ...answer, previous_response_id: id };
}

/** `part` as it is, or, when it carries the response, printed again with `previous_response_id` set to `id`. */
export function echoPreviousIdInEvent(part: EventPart, id: string): EventPart {
  if (!RESPONSE_EVENTS.has(part.event)) return part;
  let ev: unknown;
  try {
    ev = JSON.parse(part.data);
  } catch {
    return part;
  }
  const response = typeof ev === 'object' && ev !== null ? (ev as { response?: unknown }).response : undefined;
  if (typeof response !== 'object' || response === null || Array.isArray(response)) return part;
  if ((response as { previous_response_id?: unknown }).previous_response_id === id) return part;
  (ev as { response: object }).response = echoPreviousId(response, id);
  const out = new EventPart(part.event, JSON.stringify(ev), part.content, part.final, true);
  out.usage = part.usage;
  out.flush = part.flush;
  return out;
}
