/**
 * `type: openai` — any OpenAI-compatible HTTP API (OpenAI, Groq, Together, DeepSeek, Mistral,
 * vLLM, Ollama's /v1, …); the `llamacpp` backend builds on it for llama-server's /v1 routes. Calls go through `undici`'s request API on one pooled keep-alive Agent per
 * backend (backends/upstream/client.ts): the openai SDK's fetch path cost about five times the CPU per call
 * (bench/upstream-client.ts), so only its types are kept, as the internal types. No retries here
 * (the router owns them); the request's abort signal goes upstream. Request bodies go upstream as
 * the client sent them (vendor extras included), with only `model` replaced by the router.
 *
 * With `responses: true` the backend also speaks OpenAI's Responses API natively (`responses` /
 * `responsesStream`, POST {base_url}/responses): the client's body goes up as it is and the
 * stream's events come back as they were sent, with commit point, end and usage read on the way.
 * Without the flag those methods do not exist and the gateway translates through chat.
 */
import { Agent } from 'undici';
import type { OpenAIBackendConfig } from '../../config/schema.ts';
import type { GatewayError } from '../../errors/gateway-error.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../../protocol/chat/schema.ts';
import type { Completion, CompletionRequest } from '../../protocol/completions/schema.ts';
import { EventPart, type ChunkPart, type PartUsage } from '../../protocol/stream-part.ts';
import { fromResponsesUsage, isContentEventType, TERMINAL_EVENTS } from '../../protocol/responses/usage.ts';
import { inputCount, type Embedding, type EmbeddingAnswer, type EmbeddingRequest, type EmbeddingResponse } from '../../protocol/embeddings/schema.ts';
import type { BackendHealth, BaseLLM, CallContext, Capabilities, JsonObject, NativeCall } from '../contract.ts';
import { sniffEmbeddings } from './embeddings-passthrough.ts';
import { UpstreamClient, parseJsonOnce } from './client.ts';
import type { CallOptions, SseFraming, StatusErrorInfo } from './types.ts';
import { streamErrorEvent } from './sse-reader.ts';
import { fromUpstreamStatus, upstreamMalformed } from '../../errors/upstream.ts';

export interface OpenAICompatibleOptions {
  /** Error framings of the upstream's event streams beyond `data: {"error":…}` (llama-server's). */
  sseFraming?: SseFraming;
}

/** Responses stream events that carry one delta of content: always content, never usage or an error. */
const PLAIN_DELTAS: ReadonlySet<string> = new Set([
  'response.output_text.delta',
  'response.function_call_arguments.delta',
  'response.custom_tool_call_input.delta',
  'response.reasoning_summary_text.delta',
  'response.reasoning_text.delta',
  'response.refusal.delta',
]);

export class OpenAICompatibleBackend implements BaseLLM {
  readonly type = 'openai' as const;
  readonly capabilities: Capabilities = { chat: true, embeddings: true, completions: true };
  private readonly http: UpstreamClient;
  private readonly dispatcher: Agent;
  protected readonly secrets: string[];
  /** Present only with `responses: true` (declared, so absent otherwise: the gateway then translates). */
  declare responses?: (call: NativeCall, ctx: CallContext) => Promise<JsonObject>;
  declare responsesStream?: (call: NativeCall, ctx: CallContext) => Promise<AsyncIterable<EventPart>>;

  constructor(
    readonly id: string,
    cfg: OpenAIBackendConfig,
    options: OpenAICompatibleOptions = {},
  ) {
    this.dispatcher = new Agent({
      connections: cfg.max_connections,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      // The router enforces its own deadlines; undici's defaults (300 s) would be a second, hidden one.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    this.secrets = [cfg.api_key ?? '', ...Object.values(cfg.headers ?? {})].filter((s) => s.length >= 8);
    const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'switchyard' };
    if (cfg.api_key) headers.authorization = `Bearer ${cfg.api_key}`;
    if (cfg.organization) headers['openai-organization'] = cfg.organization;
    if (cfg.project) headers['openai-project'] = cfg.project;
    for (const [k, v] of Object.entries(cfg.headers ?? {})) headers[k.toLowerCase()] = v;
    this.http = new UpstreamClient({
      backend: id,
      baseUrl: cfg.base_url,
      dispatcher: this.dispatcher,
      headers,
      secrets: this.secrets,
      maxResponseBytes: cfg.max_response_bytes,
      statusError: (info) => this.fromStatus(info),
      streamError: (error) => this.fromStreamError(error),
      sseFraming: options.sseFraming,
    });
    if (cfg.responses === true) {
      this.responses = (call, ctx) => this.nativeResponses(call, ctx);
      this.responsesStream = (call, ctx) => this.nativeResponsesStream(call, ctx);
    }
  }

  async chat(req: ChatRequest, ctx: CallContext): Promise<ChatCompletion> {
    // Only called for non-streaming requests: send the body as it came (no `stream: false` added).
    const res = await this.http.postJson('/chat/completions', req, opts(ctx));
    if (!hasChoices(res)) throw upstreamMalformed(this.id, 'no "choices" array');
    return res as ChatCompletion;
  }

  chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<ChunkPart<ChatCompletionChunk>>> {
    return this.http.postStream<ChatCompletionChunk>('/chat/completions', req.stream === true ? req : { ...req, stream: true }, opts(ctx));
  }

  async complete(req: CompletionRequest, ctx: CallContext): Promise<Completion> {
    const res = await this.http.postJson('/completions', req, opts(ctx));
    if (!hasChoices(res)) throw upstreamMalformed(this.id, 'no "choices" array');
    return res as Completion;
  }

  completeStream(req: CompletionRequest, ctx: CallContext): Promise<AsyncIterable<ChunkPart<Completion>>> {
    return this.http.postStream<Completion>('/completions', req.stream === true ? req : { ...req, stream: true }, opts(ctx));
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

  async embed(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingAnswer> {
    // Ask upstream for what the client wants. An answer already in that form is forwarded as its
    // bytes (checked, not rebuilt: embeddings-passthrough.ts); any other is parsed, and the gateway
    // converts when the upstream ignored the format.
    const format = req.encoding_format ?? 'float';
    const inputs = inputCount(req.input);
    const bytes = await this.http.postForBytes('/embeddings', { ...req, encoding_format: format }, opts(ctx));
    // forwarded as its bytes, or parsed (after which its bytes are not read again)
    return sniffEmbeddings(bytes, format, inputs) ?? this.checkEmbeddings(parseJsonOnce(this.id, bytes), inputs);
  }

  async health(ctx: CallContext): Promise<BackendHealth> {
    try {
      await this.http.getJson('/models', opts(ctx));
      return { ok: true, ready: true };
    } catch (err) {
      return { ok: false, ready: false, detail: err instanceof Error ? err.message : 'unreachable' };
    }
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  /** A non-2xx answer → the error the client sees. */
  protected fromStatus(info: StatusErrorInfo): GatewayError {
    return fromUpstreamStatus(info);
  }

  /** The `error` of a `data: {"error":…}` event inside a stream that had begun. */
  protected fromStreamError(error: unknown): GatewayError {
    return streamErrorEvent(this.id, error, this.secrets);
  }

  protected checkEmbeddings(res: unknown, inputs: number): EmbeddingResponse {
    if (!res || typeof res !== 'object' || !Array.isArray((res as { data?: unknown }).data)) {
      throw upstreamMalformed(this.id, 'no "data" array');
    }
    const r = res as { data: unknown[]; model?: unknown; usage?: { prompt_tokens?: unknown; total_tokens?: unknown } };
    if (r.data.length !== inputs) throw upstreamMalformed(this.id, `${r.data.length} embeddings for ${inputs} inputs`);
    const data: Embedding[] = r.data.map((d, i) => {
      const e = d as { embedding?: unknown; index?: unknown } | null;
      const v = e?.embedding;
      if (!(typeof v === 'string' || (Array.isArray(v) && v.every((x) => typeof x === 'number')))) {
        throw upstreamMalformed(this.id, `data[${i}].embedding is neither a number array nor base64`);
      }
      return { object: 'embedding', index: typeof e?.index === 'number' ? e.index : i, embedding: v as number[] | string };
    });
    const pt = typeof r.usage?.prompt_tokens === 'number' ? r.usage.prompt_tokens : 0;
    const tt = typeof r.usage?.total_tokens === 'number' ? r.usage.total_tokens : pt;
    return { object: 'list', data, model: typeof r.model === 'string' ? r.model : '', usage: { prompt_tokens: pt, total_tokens: tt } };
  }
}

/** Per-request options: the attempt's abort signal, the request id so upstream logs correlate, its trace. */
function opts(ctx: CallContext): CallOptions {
  // the attempt's light abort when there is one (undici takes it; ctx.signal would make an AbortSignal)
  return { signal: ctx.abort ?? ctx.signal, headers: { 'x-request-id': ctx.requestId }, trace: ctx.trace };
}

/** A native call's options: its protocol headers (those the backend does not own) and the request id. */
function nativeOpts(call: NativeCall, ctx: CallContext): CallOptions {
  if (call.headers === undefined) return opts(ctx);
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(call.headers)) if (!OWN_HEADERS.has(k.toLowerCase())) headers[k] = v;
  headers['x-request-id'] = ctx.requestId;
  return { signal: ctx.abort ?? ctx.signal, headers, trace: ctx.trace };
}

/** Headers a native call may not set: the backend's credentials and the request's framing. */
const OWN_HEADERS: ReadonlySet<string> = new Set([
  'authorization', 'openai-organization', 'openai-project', 'host', 'content-type', 'content-length',
  'accept', 'accept-encoding', 'connection', 'transfer-encoding', 'x-request-id',
]);

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

function hasChoices(res: unknown): boolean {
  return typeof res === 'object' && res !== null && Array.isArray((res as { choices?: unknown }).choices);
}
