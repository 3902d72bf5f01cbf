/**
 * `type: openai` — any OpenAI-compatible HTTP API (OpenAI, Groq, Together, DeepSeek, Mistral,
 * vLLM, Ollama's /v1, …): chat, completions and embeddings as every OpenAI-shaped upstream serves
 * them (backends/upstream/openai-compatible.ts).
 *
 * With `responses: true` it also speaks OpenAI's Responses API natively (`responses` /
 * `responsesStream`, POST {base_url}/responses): the client's body goes up as it is and the
 * stream's events come back as they were sent, with commit point, end and usage read on the way.
 * Without the flag those methods do not exist and the gateway translates through chat.
 */
import type { OpenAIBackendConfig } from '../../config/schema.ts';
import { upstreamMalformed } from '../../errors/upstream.ts';
import { fromResponsesUsage, isContentEventType, TERMINAL_EVENTS } from '../../protocol/responses/usage.ts';
import { EventPart, type PartUsage } from '../../protocol/stream-part.ts';
import type { CallContext, JsonObject, NativeCall } from '../contract.ts';
import { OpenAICompatibleBackend, opts } from '../upstream/openai-compatible.ts';
import type { CallOptions } from '../upstream/types.ts';

/** Responses stream events that carry one delta of content: always content, never usage or an error. */
const PLAIN_DELTAS: ReadonlySet<string> = new Set([
  'response.output_text.delta',
  'response.function_call_arguments.delta',
  'response.custom_tool_call_input.delta',
  'response.reasoning_summary_text.delta',
  'response.reasoning_text.delta',
  'response.refusal.delta',
]);

/** Headers a native call may not set: the backend's credentials and the request's framing. */
const OWN_HEADERS: ReadonlySet<string> = new Set([
  'authorization', 'openai-organization', 'openai-project', 'host', 'content-type', 'content-length',
  'accept', 'accept-encoding', 'connection', 'transfer-encoding', 'x-request-id',
]);

export class OpenAIBackend extends OpenAICompatibleBackend {
  /** Present only with `responses: true` (declared, so absent otherwise: the gateway then translates). */
  declare responses?: (call: NativeCall, ctx: CallContext) => Promise<JsonObject>;
  declare responsesStream?: (call: NativeCall, ctx: CallContext) => Promise<AsyncIterable<EventPart>>;

  constructor(id: string, cfg: OpenAIBackendConfig) {
    super(id, cfg);
    if (cfg.responses === true) {
      this.responses = (call, ctx) => this.nativeResponses(call, ctx);
      this.responsesStream = (call, ctx) => this.nativeResponsesStream(call, ctx);
    }
  }

  /** Responses API, JSON: the body as given (`stream: false` included), the upstream's Response object. */
  private async nativeResponses(call: NativeCall, ctx: CallContext): Promise<JsonObject> {
    const res = await this.http.postJson('/responses', call.body, nativeOpts(call, ctx));
    if (!isJsonObject(res)) throw upstreamMalformed(this.id, 'the response is not a JSON object');
    return res;
  }

  /** Responses API, stream: every event as it came, read for commit point, end and usage. */
  private nativeResponsesStream(call: NativeCall, ctx: CallContext): Promise<AsyncIterable<EventPart>> {
    const body = call.body.stream === true ? call.body : { ...call.body, stream: true };
    return this.http.postEventStream('/responses', body, nativeOpts(call, ctx), (event, data) => this.decodeResponsesEvent(event, data));
  }

  /**
   * One event of a Responses stream → its part. Hot path: an event named on its `event:` line as
   * a plain delta (one per token) is checked to be a JSON object's text and forwarded unparsed;
   * every other event (an item added: its type decides the commit point; a terminal one: its
   * usage; an error; an event without a name) is parsed. An `error` event throws the mid-stream
   * error it stands for.
   */
  private decodeResponsesEvent(event: string, data: string): EventPart {
    if (PLAIN_DELTAS.has(event)) {
      if (data.charCodeAt(0) !== 123 || data.charCodeAt(data.length - 1) !== 125) throw upstreamMalformed(this.id, `a "${event}" event of the stream is not a JSON object`);
      return new EventPart(event, data, true, false);
    }
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      throw upstreamMalformed(this.id, 'an event of the stream is not JSON');
    }
    if (!isJsonObject(value)) throw upstreamMalformed(this.id, 'an event of the stream is not a JSON object');
    // the data's `type` is the event's type; the `event:` line only repeats it (and may be absent)
    const type = typeof value.type === 'string' ? value.type : event;
    if (type === 'error') throw this.fromStreamError(isJsonObject(value.error) ? value.error : value);
    const item = value.item;
    const itemType = isJsonObject(item) && typeof item.type === 'string' ? item.type : undefined;
    const final = TERMINAL_EVENTS.has(type);
    const part = new EventPart(event, data, isContentEventType(type, itemType), final);
    if (final && isJsonObject(value.response)) part.usage = partUsage(value.response.usage);
    return part;
  }
}

/** A native call's options: its protocol headers (those the backend does not own) and the request id. */
function nativeOpts(call: NativeCall, ctx: CallContext): CallOptions {
  if (call.headers === undefined) return opts(ctx);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(call.headers)) if (!OWN_HEADERS.has(k.toLowerCase())) headers[k] = v;
  headers['x-request-id'] = ctx.requestId;
  return { signal: ctx.abort ?? ctx.signal, headers, trace: ctx.trace };
}

/** A Responses `usage` → the gateway's usage (chat names); undefined when it has no token counts. */
function partUsage(usage: unknown): PartUsage | undefined {
  const u = fromResponsesUsage(usage);
  if (u === undefined) return undefined;
  const out: PartUsage = { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.total_tokens };
  if (u.cached_tokens !== undefined) out.prompt_tokens_details = { cached_tokens: u.cached_tokens };
  return out;
}

function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
