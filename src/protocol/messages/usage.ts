/**
 * Usage of a NATIVE Anthropic answer (bytes passed through), read for limits and cost, and the
 * commit-point predicate for native streams.
 *
 * Anthropic reports usage in `message_start.message.usage` (input and cache counts, a first
 * output count) and again in `message_delta.usage` (cumulative: output always, the others when
 * they apply); a later report wins field by field. Anthropic's `input_tokens` excludes cached
 * tokens, so the gateway's shape is prompt_tokens = input + cache read + cache creation, with the
 * two cache counts in `prompt_tokens_details` (as the Anthropic backend reports chat usage) so
 * cost can price them.
 */

export interface NativeUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number; cache_creation_tokens: number };
}

type Counts = { input: number; output: number; read: number; created: number };
const KEYS = [
  ['input', 'input_tokens'],
  ['output', 'output_tokens'],
  ['read', 'cache_read_input_tokens'],
  ['created', 'cache_creation_input_tokens'],
] as const;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function merge(into: Partial<Counts>, usage: unknown): boolean {
  if (!isRecord(usage)) return false;
  let any = false;
  for (const [k, wire] of KEYS) {
    const v = usage[wire];
    if (typeof v === 'number' && Number.isFinite(v)) {
      into[k] = v;
      any = true;
    }
  }
  return any;
}

function shape(c: Partial<Counts>): NativeUsage {
  const read = c.read ?? 0;
  const created = c.created ?? 0;
  const prompt = (c.input ?? 0) + read + created;
  const completion = c.output ?? 0;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: read, cache_creation_tokens: created },
  };
}

/** Usage of a native JSON answer (the Message object), or undefined when it has none. */
export function usageOf(body: unknown): NativeUsage | undefined {
  const c: Partial<Counts> = {};
  return isRecord(body) && merge(c, body.usage) ? shape(c) : undefined;
}

/** The SSE event names whose data carries usage: only these need parsing on a passed-through stream. */
export const USAGE_EVENTS: ReadonlySet<string> = new Set(['message_start', 'message_delta']);

/** Collects usage from a native stream's parsed events (any event may be given; others are ignored). */
export class NativeUsageReader {
  private readonly counts: Partial<Counts> = {};
  private seen = false;

  add(event: unknown): void {
    if (!isRecord(event)) return;
    if (event.type === 'message_start' && isRecord(event.message)) this.seen = merge(this.counts, event.message.usage) || this.seen;
    else if (event.type === 'message_delta') this.seen = merge(this.counts, event.usage) || this.seen;
  }

  /** undefined until a usage report was seen. */
  get usage(): NativeUsage | undefined {
    return this.seen ? shape(this.counts) : undefined;
  }
}

/**
 * The commit point of a native stream: the first `content_block_start` or `content_block_delta`.
 * Before it (message_start, ping) a failure may still fail over; after it the client has content.
 * Takes the SSE event name or the parsed event.
 */
export function isContentEvent(event: string | { type?: unknown } | null | undefined): boolean {
  const type = typeof event === 'string' ? event : event?.type;
  return type === 'content_block_start' || type === 'content_block_delta';
}
