/**
 * `type: llamacpp` — llama.cpp's llama-server, a model on the operator's own hardware.
 *
 * Requests go through llama-server's OpenAI-compatible routes (`/v1/chat/completions`,
 * `/v1/completions`, `/v1/embeddings`) by the `openai` backend's machinery (undici.request on a
 * pooled dispatcher), so its extras (`cache_prompt`, `n_probs`, `grammar`, `json_schema`, …) go upstream
 * as the client sent them and its answers' extras (`timings`, `reasoning_content`, …) come back.
 * What this file adds is what makes a local server a good citizen of the router:
 *
 * - `load()` waits for GET /health to answer 200 (503 "Loading model" means loading: not ready,
 *   not broken), up to `load_timeout_ms`. A server that is not up by then fails the load but is
 *   still watched: `whenReady()` resolves when it comes up after all.
 * - `capacity()` from /slots, polled every `slots_poll_ms`, plus the requests the gateway has in
 *   flight to it (see backends/llamacpp/monitor.ts).
 * - llama-server's error answers mapped with meaning (backends/llamacpp/errors.ts): 501 (e.g. started
 *   without --embeddings) → 400 `unsupported` naming the flag, 503 loading → 503
 *   `backend_not_ready`, context overflow → 400 `context_length_exceeded`.
 * - its mid-stream error events, in every shape it has used, end the client's stream with an
 *   error (backends/llamacpp/sse.ts).
 */
import { DEFAULT_MAX_RESPONSE_BYTES, type LlamaCppBackendConfig } from '../../config/schema.ts';
import { GatewayError } from '../../errors/gateway-error.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../../protocol/chat/schema.ts';
import type { Completion, CompletionRequest } from '../../protocol/completions/schema.ts';
import type { EmbeddingAnswer, EmbeddingRequest, EmbeddingResponse } from '../../protocol/embeddings/schema.ts';
import type { ChunkPart } from '../../protocol/stream-part.ts';
import type { Logger } from '../../telemetry/logger.ts';
import type { BackendHealth, BaseLLM, CallContext, Capabilities, Capacity } from '../contract.ts';
import { fromLlamaStatus, llamaStreamError, poolingNone, type LlamaErrorBody } from './errors.ts';
import { LlamaServerMonitor } from './monitor.ts';
import { llamaSseFraming } from './sse.ts';
import type { StatusErrorInfo } from '../upstream/types.ts';
import { withEnd } from '../../lib/pollable.ts';
import { OpenAICompatibleBackend } from '../upstream/openai-compatible.ts';

/** The server root: no trailing slash, no trailing /v1 (the OpenAI routes are under /v1). */
export function llamaServerRoot(baseUrl: string): string {
  return baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
}

/**
 * The `openai` backend pointed at llama-server's /v1, reading llama-server's error bodies and
 * embedding shapes. Internal to LlamaCppBackend.
 */
class LlamaServerClient extends OpenAICompatibleBackend {
  constructor(
    private readonly backendId: string,
    cfg: LlamaCppBackendConfig,
    private readonly secretList: string[],
  ) {
    super(
      backendId,
      {
        type: 'openai',
        base_url: `${llamaServerRoot(cfg.base_url)}/v1`,
        api_key: cfg.api_key || undefined,
        max_connections: cfg.max_connections,
        max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        timeout_ms: cfg.timeout_ms,
        stream_idle_timeout_ms: cfg.stream_idle_timeout_ms,
        first_token_timeout_ms: cfg.first_token_timeout_ms,
      },
      { sseFraming: llamaSseFraming },
    );
  }

  protected override fromStatus(info: StatusErrorInfo): GatewayError {
    const body = info.error as LlamaErrorBody | undefined;
    return fromLlamaStatus({
      backend: this.backendId,
      status: info.status,
      // a body that was not JSON: its text is the message
      error: body ?? (info.bodyText ? { message: info.bodyText } : undefined),
      retryAfter: info.retryAfter,
      secrets: this.secretList,
    });
  }

  /** An error event inside a stream that had begun. */
  protected override fromStreamError(error: unknown): GatewayError {
    return llamaStreamError(this.backendId, error, this.secretList);
  }

  /** Pooling `none` gives one vector per token (a 2-D array): say so instead of "malformed". */
  protected override checkEmbeddings(res: unknown, inputs: number): EmbeddingResponse {
    const data = typeof res === 'object' && res !== null ? (res as { data?: unknown }).data : undefined;
    const first = Array.isArray(data) ? (data[0] as { embedding?: unknown } | undefined)?.embedding : undefined;
    if (Array.isArray(first) && first.length > 0 && Array.isArray(first[0])) throw poolingNone(this.backendId);
    return super.checkEmbeddings(res, inputs);
  }
}

export class LlamaCppBackend implements BaseLLM {
  readonly type = 'llamacpp' as const;
  readonly capabilities: Capabilities = { chat: true, embeddings: true, completions: true };
  private readonly client: LlamaServerClient;
  private readonly monitor: LlamaServerMonitor;

  constructor(
    readonly id: string,
    cfg: LlamaCppBackendConfig,
    logger?: Logger,
  ) {
    const secrets = [cfg.api_key ?? ''].filter((s) => s.length >= 8);
    this.client = new LlamaServerClient(id, cfg, secrets);
    const root = llamaServerRoot(cfg.base_url);
    this.monitor = new LlamaServerMonitor({
      backend: id,
      root,
      apiKey: cfg.api_key || undefined,
      pollMs: cfg.slots_poll_ms,
      loadTimeoutMs: cfg.load_timeout_ms,
      onChange: (state, detail) => {
        if (!logger) return;
        const fields = { backend: id, state, detail };
        if (state === 'ready') logger.info('llama-server ready', fields);
        else if (state === 'loading') logger.info('llama-server loading its model', fields);
        else logger.warn('llama-server not ready', fields);
      },
    });
  }

  /** Waits for GET /health to answer 200, up to load_timeout_ms (then keeps watching: whenReady). */
  load(): Promise<void> {
    return this.monitor.waitUntilReady();
  }

  /** Resolves when the server is ready, however long that takes (after a failed load, too). */
  whenReady(): Promise<void> {
    return this.monitor.whenReady();
  }

  capacity(): Capacity | undefined {
    return this.monitor.capacity();
  }

  async health(): Promise<BackendHealth> {
    const h = await this.monitor.checkHealth();
    return { ok: h.ready, ready: h.ready, detail: `${this.monitor.state}: ${h.detail}` };
  }

  chat(req: ChatRequest, ctx: CallContext): Promise<ChatCompletion> {
    return this.tracked(() => this.client.chat(req, ctx));
  }

  chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<ChunkPart<ChatCompletionChunk>>> {
    return this.trackedStream(() => this.client.chatStream(req, ctx));
  }

  complete(req: CompletionRequest, ctx: CallContext): Promise<Completion> {
    return this.tracked(() => this.client.complete(req, ctx));
  }

  completeStream(req: CompletionRequest, ctx: CallContext): Promise<AsyncIterable<ChunkPart<Completion>>> {
    return this.trackedStream(() => this.client.completeStream(req, ctx));
  }

  embed(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingAnswer> {
    // llama-server returns floats (newer versions honour base64 too); the gateway answers in the
    // client's encoding_format whatever comes back.
    return this.tracked(() => this.client.embed(req, ctx));
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.monitor.stop(), this.client.close()]);
  }

  /** Counts the call as in flight, and tells the monitor what the answer said about readiness. */
  private async tracked<T>(call: () => Promise<T>): Promise<T> {
    const release = this.monitor.acquire();
    try {
      const r = await call();
      this.monitor.observe('served');
      return r;
    } catch (err) {
      this.noteFailure(err);
      throw err;
    } finally {
      release();
    }
  }

  private async trackedStream<T>(open: () => Promise<AsyncIterable<T>>): Promise<AsyncIterable<T>> {
    const release = this.monitor.acquire();
    let stream: AsyncIterable<T>;
    try {
      stream = await open();
    } catch (err) {
      release();
      this.noteFailure(err);
      throw err;
    }
    this.monitor.observe('served');
    return withEnd(stream, release);
  }

  private noteFailure(err: unknown): void {
    if (err instanceof GatewayError && err.code === 'backend_not_ready') this.monitor.observe('loading');
  }
}
