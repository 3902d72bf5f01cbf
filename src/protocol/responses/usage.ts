/**
 * Reading a NATIVE Responses answer on the way through (the pass-through path): its token usage,
 * for limits and cost, and where its stream commits.
 * - Usage is in the JSON body's `usage`, or in the `response` of the terminal stream event
 *   (`response.completed`, `response.incomplete`, `response.failed`).
 * - Commit point: the first event that shows the client part of the answer: a delta of text,
 *   refusal, reasoning or tool-call arguments/input, or `response.output_item.added` of any item
 *   but `reasoning` (a message or a tool call). `response.created` / `in_progress` and a bare
 *   reasoning item are not content: an attempt may still fail over after them.
 */

/** Usage in the gateway's chat terms. */
export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** input_tokens_details.cached_tokens, when reported */
  cached_tokens?: number;
  /** output_tokens_details.reasoning_tokens, when reported */
  reasoning_tokens?: number;
}

type Json = Record<string, unknown>;
const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);

/** A Responses `usage` object → TokenUsage; undefined when it is missing or has no token counts. */
export function fromResponsesUsage(usage: unknown): TokenUsage | undefined {
  if (!isRecord(usage)) return undefined;
  const input = count(usage.input_tokens);
  const output = count(usage.output_tokens);
  if (input === undefined && output === undefined) return undefined;
  const out: TokenUsage = {
    prompt_tokens: input ?? 0,
    completion_tokens: output ?? 0,
    total_tokens: count(usage.total_tokens) ?? (input ?? 0) + (output ?? 0),
  };
  const cached = isRecord(usage.input_tokens_details) ? count(usage.input_tokens_details.cached_tokens) : undefined;
  if (cached !== undefined) out.cached_tokens = cached;
  const reasoning = isRecord(usage.output_tokens_details) ? count(usage.output_tokens_details.reasoning_tokens) : undefined;
  if (reasoning !== undefined) out.reasoning_tokens = reasoning;
  return out;
}

/** Usage of a non-streamed Responses body (the Response object). */
export function usageOf(body: unknown): TokenUsage | undefined {
  return isRecord(body) ? fromResponsesUsage(body.usage) : undefined;
}

export const TERMINAL_EVENTS: ReadonlySet<string> = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/** Usage carried by a stream event (only the terminal events carry it). */
export function usageFromEvent(event: unknown): TokenUsage | undefined {
  if (!isRecord(event) || typeof event.type !== 'string' || !TERMINAL_EVENTS.has(event.type)) return undefined;
  return usageOf(event.response);
}

/** True for an event that ends the stream: a terminal response event or `error`. */
export function isFinalEvent(event: unknown): boolean {
  return isRecord(event) && typeof event.type === 'string' && (TERMINAL_EVENTS.has(event.type) || event.type === 'error');
}

const CONTENT_DELTAS: ReadonlySet<string> = new Set([
  'response.output_text.delta',
  'response.refusal.delta',
  'response.function_call_arguments.delta',
  'response.custom_tool_call_input.delta',
  'response.reasoning_summary_text.delta',
  'response.reasoning_text.delta',
  'response.audio.delta',
  'response.audio.transcript.delta',
]);

/**
 * Whether a native stream event is content (the commit point). `itemType` is the
 * `item.type` of a `response.output_item.added` event (read from its data).
 */
export function isContentEventType(type: string, itemType?: string): boolean {
  if (CONTENT_DELTAS.has(type)) return true;
  return type === 'response.output_item.added' && itemType !== undefined && itemType !== 'reasoning';
}

/** isContentEventType on a parsed event. */
export function isContentEvent(event: unknown): boolean {
  if (!isRecord(event) || typeof event.type !== 'string') return false;
  const item = isRecord(event.item) && typeof event.item.type === 'string' ? event.item.type : undefined;
  return isContentEventType(event.type, item);
}
