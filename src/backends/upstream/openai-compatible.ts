/**
 * What every OpenAI-shaped upstream shares: chat, legacy completions, embeddings and the health
 * probe over `/v1`-style routes. `type: openai` (backends/openai/) and llama-server's backend
 * (backends/llamacpp/) build on it. Calls go through `undici`'s request API on one pooled
 * keep-alive Agent per backend (client.ts): the openai SDK's fetch path cost about five times the
 * CPU per call (bench/upstream-client.ts), so only its types are kept, as the internal types. No
 * retries here (the router owns them); the request's abort signal goes upstream. Request bodies go
 * upstream as the client sent them (vendor extras included), with only `model` replaced by the
 * router.
 */
import type { Agent } from 'undici';
import type { OpenAIBackendConfig } from '../../config/schema.ts';
import type { GatewayError } from '../../errors/gateway-error.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../../protocol/chat/schema.ts';
import type { Completion, CompletionRequest } from '../../protocol/completions/schema.ts';
import type { ChunkPart } from '../../protocol/stream-part.ts';
import { inputCount, type Embedding, type EmbeddingAnswer, type EmbeddingRequest, type EmbeddingResponse } from '../../protocol/embeddings/schema.ts';
import type { BackendHealth, BaseLLM, CallContext, Capabilities } from '../contract.ts';
import { sniffEmbeddings } from './embeddings-passthrough.ts';
import { UpstreamClient, parseJsonOnce, upstreamAgent } from './client.ts';
import type { CallOptions, SseFraming, StatusErrorInfo } from './types.ts';
import { streamErrorEvent } from './sse-reader.ts';
import { fromUpstreamStatus, upstreamMalformed } from '../../errors/upstream.ts';

export interface OpenAICompatibleOptions {
  /** Error framings of the upstream's event streams beyond `data: {"error":…}` (llama-server's). */
  sseFraming?: SseFraming;
}

export class OpenAICompatibleBackend implements BaseLLM {
  readonly type = 'openai' as const;
  readonly capabilities: Capabilities = { chat: true, embeddings: true, completions: true };
  protected readonly http: UpstreamClient;
  private readonly dispatcher: Agent;
  protected readonly secrets: string[];

  constructor(
    readonly id: string,
    cfg: OpenAIBackendConfig,
    options: OpenAICompatibleOptions = {},
  ) {
    this.dispatcher = upstreamAgent(cfg.max_connections);
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
export function opts(ctx: CallContext): CallOptions {
  // the attempt's light abort when there is one (undici takes it; ctx.signal would make an AbortSignal)
  return { signal: ctx.abort ?? ctx.signal, headers: { 'x-request-id': ctx.requestId }, trace: ctx.trace };
}

function hasChoices(res: unknown): boolean {
  return typeof res === 'object' && res !== null && Array.isArray((res as { choices?: unknown }).choices);
}
