/**
 * `type: openai` — any OpenAI-compatible HTTP API (OpenAI, Groq, Together, DeepSeek, Mistral,
 * vLLM, Ollama's /v1, …). Built on the official `openai` SDK with `maxRetries: 0` (the router owns
 * retries), the request's abort signal, and one pooled keep-alive undici dispatcher per backend.
 * Request bodies go upstream as the client sent them (vendor extras included), with only `model`
 * replaced by the router.
 */
import OpenAI from 'openai';
import type { ChatCompletionCreateParamsNonStreaming, ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions';
import type { CompletionCreateParamsNonStreaming, CompletionCreateParamsStreaming } from 'openai/resources/completions';
import type { EmbeddingCreateParams } from 'openai/resources/embeddings';
import { Agent, fetch as undiciFetch } from 'undici';
import type { OpenAIBackendConfig } from '../config/schema.ts';
import { GatewayError } from '../errors.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../protocol/chat.ts';
import type { Completion, CompletionRequest } from '../protocol/completions.ts';
import type { Embedding, EmbeddingRequest, EmbeddingResponse } from '../protocol/embeddings.ts';
import type { BackendHealth, BaseLLM, CallContext, Capabilities } from './base-llm.ts';
import { fromUpstreamStatus, redact, retryAfterSeconds, upstreamMalformed, upstreamUnreachable } from './upstream-errors.ts';

type Fetch = NonNullable<ConstructorParameters<typeof OpenAI>[0]>['fetch'];

export class OpenAICompatibleBackend implements BaseLLM {
  readonly type = 'openai' as const;
  readonly capabilities: Capabilities = { chat: true, embeddings: true, completions: true };
  private readonly client: OpenAI;
  private readonly dispatcher: Agent;
  private readonly secrets: string[];

  constructor(
    readonly id: string,
    private readonly cfg: OpenAIBackendConfig,
    /** `fetch`: wraps undici's fetch (the llamacpp backend normalizes llama-server's SSE error events). */
    options: { fetch?: typeof undiciFetch } = {},
  ) {
    this.dispatcher = new Agent({
      connections: cfg.max_connections,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 600_000,
      // The router enforces its own deadlines; undici's defaults (300 s) would be a second, hidden one.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    const headers: Record<string, string | null> = { ...(cfg.headers ?? {}) };
    if (!cfg.api_key) headers.Authorization = null;
    this.secrets = [cfg.api_key ?? '', ...Object.values(cfg.headers ?? {})].filter((s) => s.length >= 8);
    this.client = new OpenAI({
      apiKey: cfg.api_key || 'no-key',
      adminAPIKey: null,
      organization: cfg.organization ?? null,
      project: cfg.project ?? null,
      webhookSecret: null,
      baseURL: cfg.base_url,
      maxRetries: 0,
      // Deadlines are enforced by the router through the abort signal.
      timeout: 24 * 3600_000,
      defaultHeaders: headers,
      fetch: (options.fetch ?? undiciFetch) as unknown as Fetch,
      fetchOptions: { dispatcher: this.dispatcher } as NonNullable<ConstructorParameters<typeof OpenAI>[0]>['fetchOptions'],
      logLevel: 'off',
    });
  }

  async chat(req: ChatRequest, ctx: CallContext): Promise<ChatCompletion> {
    // Only called for non-streaming requests: send the body as it came (no `stream: false` added).
    const body = req as unknown as ChatCompletionCreateParamsNonStreaming;
    const res = await this.call(() => this.client.chat.completions.create(body, this.opts(ctx)));
    if (!res || typeof res !== 'object' || !Array.isArray(res.choices)) throw upstreamMalformed(this.id, 'no "choices" array');
    return res;
  }

  async chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<ChatCompletionChunk>> {
    const body = { ...req, stream: true } as unknown as ChatCompletionCreateParamsStreaming;
    const stream = await this.call(() => this.client.chat.completions.create(body, this.opts(ctx)));
    return this.mapStream(stream);
  }

  async complete(req: CompletionRequest, ctx: CallContext): Promise<Completion> {
    const body = req as unknown as CompletionCreateParamsNonStreaming;
    const res = await this.call(() => this.client.completions.create(body, this.opts(ctx)));
    if (!res || typeof res !== 'object' || !Array.isArray(res.choices)) throw upstreamMalformed(this.id, 'no "choices" array');
    return res;
  }

  async completeStream(req: CompletionRequest, ctx: CallContext): Promise<AsyncIterable<Completion>> {
    const body = { ...req, stream: true } as unknown as CompletionCreateParamsStreaming;
    const stream = await this.call(() => this.client.completions.create(body, this.opts(ctx)));
    return this.mapStream(stream);
  }

  async embed(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingResponse> {
    // Ask upstream for what the client wants; with an explicit format the SDK returns the bytes
    // as they came, and the HTTP layer converts whatever arrived (some vendors ignore base64).
    const body = { ...req, encoding_format: req.encoding_format ?? 'float' } as unknown as EmbeddingCreateParams;
    const res: unknown = await this.call(() => this.client.embeddings.create(body, this.opts(ctx)));
    return this.checkEmbeddings(res);
  }

  async health(ctx: CallContext): Promise<BackendHealth> {
    try {
      await this.call(() => this.client.models.list(this.opts(ctx)));
      return { ok: true, ready: true };
    } catch (err) {
      return { ok: false, ready: false, detail: err instanceof Error ? err.message : 'unreachable' };
    }
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  /** Per-request options: the attempt's abort signal, and the request id so upstream logs correlate. */
  private opts(ctx: CallContext): { signal: AbortSignal; headers: Record<string, string> } {
    return { signal: ctx.signal, headers: { 'x-request-id': ctx.requestId } };
  }

  protected checkEmbeddings(res: unknown): EmbeddingResponse {
    if (!res || typeof res !== 'object' || !Array.isArray((res as { data?: unknown }).data)) {
      throw upstreamMalformed(this.id, 'no "data" array');
    }
    const r = res as { data: unknown[]; model?: unknown; usage?: { prompt_tokens?: unknown; total_tokens?: unknown } };
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

  private async *mapStream<T>(stream: AsyncIterable<T>): AsyncGenerator<T> {
    try {
      for await (const chunk of stream) yield chunk;
    } catch (err) {
      const e = this.mapError(err);
      if (e instanceof GatewayError && e.code === 'upstream_unreachable') {
        // The connection was up (we were reading the stream) and then went away.
        const lost = new GatewayError(`Backend "${this.id}" dropped the connection mid-stream.`, {
          status: 502,
          type: 'upstream_error',
          code: 'upstream_connection_lost',
          retryable: true,
          cause: err,
        });
        lost.backend = this.id;
        throw lost;
      }
      throw e;
    }
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw this.mapError(err);
    }
  }

  /** SDK errors → GatewayError. Aborts are rethrown as they are: the router knows why it aborted. */
  mapError(err: unknown): unknown {
    if (err instanceof GatewayError) return err;
    if (err instanceof OpenAI.APIUserAbortError) return err;
    if (err instanceof OpenAI.APIConnectionTimeoutError) return upstreamUnreachable(this.id, 'connection timed out');
    if (err instanceof OpenAI.APIConnectionError) {
      const cause = err.cause instanceof Error ? (err.cause.cause instanceof Error ? err.cause.cause : err.cause) : undefined;
      const code = cause && 'code' in cause && typeof cause.code === 'string' ? cause.code : undefined;
      return upstreamUnreachable(this.id, code ?? redact(cause?.message ?? 'connection failed', this.secrets));
    }
    if (err instanceof OpenAI.APIError) {
      const body = err.error as UpstreamErrorBody | undefined;
      if (err.status === undefined) {
        // An `error` event inside an SSE stream.
        const msg = typeof body?.message === 'string' ? redact(body.message, this.secrets) : 'stream error';
        const e = new GatewayError(`Backend "${this.id}" reported an error mid-stream: ${msg}`, {
          status: 502,
          type: 'upstream_error',
          code: 'upstream_stream_error',
          retryable: true,
        });
        e.backend = this.id;
        return e;
      }
      return fromUpstreamStatus({
        backend: this.id,
        status: err.status,
        error: body,
        retryAfter: err.headers ? retryAfterSeconds((n) => err.headers?.get(n)) : undefined,
        secrets: this.secrets,
      });
    }
    if (err instanceof SyntaxError) return upstreamMalformed(this.id, 'invalid JSON');
    if (err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError')) return err;
    if (err instanceof TypeError || (err instanceof Error && 'code' in err)) {
      // undici: "terminated", socket resets and the like while reading a body.
      const cause = err.cause instanceof Error ? err.cause : err;
      const code = 'code' in cause && typeof cause.code === 'string' ? cause.code : cause.message;
      return upstreamUnreachable(this.id, `connection lost (${redact(code, this.secrets)})`);
    }
    return err;
  }
}

interface UpstreamErrorBody {
  message?: unknown;
  type?: unknown;
  param?: unknown;
  code?: unknown;
}
