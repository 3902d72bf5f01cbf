/**
 * `type: anthropic` — Claude through the Anthropic Messages API, behind the OpenAI Chat Completions
 * shape. Built on `@anthropic-ai/sdk` with `maxRetries: 0` (the router owns retries), the attempt's
 * abort signal, no SDK deadline (the router enforces its own through that signal), the SDK's own
 * tracing off (it would record prompts; the gateway's attempt span goes as `traceparent`) and one
 * pooled keep-alive undici dispatcher per backend. The translation itself lives in pure functions:
 * backends/anthropic/translate.ts (requests), backends/anthropic/response.ts (responses, usage) and
 * backends/anthropic/stream.ts (stream events → chunks).
 * A `/v1/messages` client's own requests take the native path instead (backends/anthropic/native.ts):
 * no SDK, the gateway's undici client on the same Agent, the body and the events as they came.
 *
 * The SDK is imported by load(), not with the gateway: it adds about 35 MB of resident memory,
 * which a gateway without an anthropic backend should not carry. The registry runs load() before
 * the server listens (and before a reloaded generation serves), so the backend is never "loading";
 * a call made before load() settled waits for the same import.
 */
import type Anthropic from '@anthropic-ai/sdk';
import type { MessageCreateParamsNonStreaming, MessageCreateParamsStreaming } from '@anthropic-ai/sdk/resources/messages';
import { fetch as undiciFetch, type Agent } from 'undici';
import { DEFAULT_ANTHROPIC_VERSION, DEFAULT_MAX_RESPONSE_BYTES, type AnthropicBackendConfig } from '../../config/schema.ts';
import { GatewayError } from '../../errors/gateway-error.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../../protocol/chat/schema.ts';
import { ChunkPart, type EventPart } from '../../protocol/stream-part.ts';
import { withTrace, type Logger } from '../../telemetry/logger.ts';
import { fromAnthropicStatus } from './errors.ts';
import { NativeMessages } from './native.ts';
import { upstreamAgent } from '../upstream/client.ts';
import { anthropicMessageSchema, streamError, toChatCompletion } from './response.ts';
import { toChatChunks } from './stream.ts';
import { toAnthropicRequest, type AnthropicRequest } from './translate.ts';
import type { BackendHealth, BaseLLM, CallContext, Capabilities, JsonObject, NativeCall } from '../contract.ts';
import { redact, retryAfterSeconds, upstreamMalformed, upstreamUnreachable } from '../../errors/upstream.ts';

type ClientOptions = NonNullable<ConstructorParameters<typeof Anthropic>[0]>;

/** Distinct dropped parameter names warned about per backend; later ones are logged at debug. */
const MAX_WARNED = 100;

/** `https://api.anthropic.com/v1/` → `https://api.anthropic.com`: the SDK adds `/v1/messages` itself. */
export function normalizeBaseURL(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/v1$/, '');
}

export class AnthropicBackend implements BaseLLM {
  readonly type = 'anthropic' as const;
  /** Anthropic has no embeddings or legacy completions API: the router answers 400 model_not_supported. */
  readonly capabilities: Capabilities = { chat: true, embeddings: false, completions: false };
  private readonly clientOptions: ClientOptions;
  private loading: Promise<Anthropic> | undefined;
  /** the SDK's class (and its error classes), once loaded */
  private sdk: typeof Anthropic | undefined;
  private readonly dispatcher: Agent;
  private readonly secrets: string[];
  private readonly version: string;
  /** Dropped parameter names already warned about (later drops are logged at debug level). */
  private readonly warned = new Set<string>();
  /** The native Messages API path (no SDK), on the same Agent. */
  private readonly native: NativeMessages;

  constructor(
    readonly id: string,
    private readonly cfg: AnthropicBackendConfig,
    private readonly logger?: Logger,
  ) {
    this.dispatcher = upstreamAgent(cfg.max_connections);
    const extra = cfg.headers ?? {};
    const versionHeader = Object.entries(extra).find(([k]) => k.toLowerCase() === 'anthropic-version')?.[1];
    this.version = versionHeader ?? cfg.anthropic_version ?? DEFAULT_ANTHROPIC_VERSION;
    this.secrets = [cfg.api_key, ...Object.values(extra)].filter((s) => s.length >= 8);
    const apiKey = cfg.api_key || 'unconfigured'; // an unconfigured backend is never called
    this.clientOptions = {
      // A key given here keeps the SDK from looking for credentials in the environment or on disk.
      apiKey,
      authToken: null,
      webhookKey: null,
      baseURL: normalizeBaseURL(cfg.base_url),
      maxRetries: 0,
      timeout: 24 * 3600_000,
      // The SDK sends the key as `Authorization: Bearer`; `x-api-key` too, for proxies that read only it.
      defaultHeaders: { 'anthropic-version': this.version, 'x-api-key': apiKey, ...extra },
      fetch: undiciFetch as unknown as ClientOptions['fetch'],
      fetchOptions: { dispatcher: this.dispatcher } as unknown as ClientOptions['fetchOptions'],
      logLevel: 'off',
      openTelemetry: false,
    };
    this.native = new NativeMessages({
      backend: id,
      baseUrl: normalizeBaseURL(cfg.base_url),
      dispatcher: this.dispatcher,
      apiKey,
      version: versionHeader ?? cfg.anthropic_version,
      headers: extra,
      secrets: this.secrets,
      // the SDK path has no cap of its own; the native path takes the gateway's default one
      maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
    });
  }

  /** Imports the SDK and builds the client (once); the gateway awaits it before it serves. */
  async load(): Promise<void> {
    await this.client();
  }

  private client(): Promise<Anthropic> {
    this.loading ??= import('@anthropic-ai/sdk').then((m) => {
      this.sdk = m.default;
      return new m.default(this.clientOptions);
    });
    return this.loading;
  }

  async chat(req: ChatRequest, ctx: CallContext): Promise<ChatCompletion> {
    const params = this.translate(req, ctx) as unknown as MessageCreateParamsNonStreaming;
    const res: unknown = await this.call(async () => (await this.client()).messages.create(params, this.opts(ctx, params)));
    const parsed = anthropicMessageSchema.safeParse(res);
    if (!parsed.success) throw upstreamMalformed(this.id, 'not a Messages API message');
    return toChatCompletion(parsed.data, Math.floor(Date.now() / 1000));
  }

  async chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<ChunkPart<ChatCompletionChunk>>> {
    const params = { ...this.translate(req, ctx), stream: true } as unknown as MessageCreateParamsStreaming;
    const events = await this.call(async () => (await this.client()).messages.create(params, this.opts(ctx, params)));
    const chunks = toChatChunks(events, { backend: this.id, secrets: this.secrets, includeUsage: req.stream_options?.include_usage === true });
    return this.mapStream(chunks);
  }

  /** A `/v1/messages` client's body, forwarded as it came (native.ts). */
  messages(call: NativeCall, ctx: CallContext): Promise<JsonObject> {
    return this.native.messages(call, ctx);
  }

  messagesStream(call: NativeCall, ctx: CallContext): Promise<AsyncIterable<EventPart>> {
    return this.native.messagesStream(call, ctx);
  }
  countMessageTokens(call: NativeCall, ctx: CallContext): Promise<JsonObject> {
    return this.native.countTokens(call, ctx);
  }


  async health(ctx: CallContext): Promise<BackendHealth> {
    try {
      await this.call(async () => (await this.client()).models.list({ limit: 1 }, this.opts(ctx)));
      return { ok: true, ready: true };
    } catch (err) {
      return { ok: false, ready: false, detail: err instanceof Error ? err.message : 'unreachable' };
    }
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  private translate(req: ChatRequest, ctx: CallContext): AnthropicRequest {
    const { body, dropped } = toAnthropicRequest(req, { defaultMaxTokens: this.cfg.default_max_tokens, anthropicVersion: this.version });
    if (dropped.length > 0 && this.logger) {
      // Unknown field names come from clients: bound what is remembered and what is logged.
      const fresh = dropped.filter((p) => !this.warned.has(p) && this.warned.size < MAX_WARNED);
      for (const p of fresh) this.warned.add(p);
      const params = dropped.slice(0, 20).map((p) => p.slice(0, 64)).join(',');
      const fields = withTrace({ backend: this.id, request_id: ctx.requestId, params, anthropic_version: this.version }, ctx.trace?.request);
      const msg = 'anthropic backend: request parameters not supported by the Anthropic API were dropped';
      if (fresh.length > 0) this.logger.warn(msg, fields);
      else this.logger.debug(msg, fields);
    }
    return body;
  }

  /**
   * Per-request options: the attempt's abort signal, the request id so upstream logs correlate,
   * and while tracing is on the attempt span's `traceparent` / `tracestate` (the span learns the call).
   */
  private opts(ctx: CallContext, params?: object): { signal: AbortSignal; headers: Record<string, string> } {
    const headers: Record<string, string> = { 'x-request-id': ctx.requestId };
    const at = ctx.trace;
    if (at !== undefined) {
      for (const k in at.headers) headers[k] = at.headers[k] as string;
      at.call(this.clientOptions.baseURL ?? '', params);
    }
    return { signal: ctx.signal, headers };
  }

  /** The translated chunks as parts (built here: printed when written), SDK errors mapped. */
  private async *mapStream<C extends object>(stream: AsyncIterable<C>): AsyncGenerator<ChunkPart<C>> {
    try {
      for await (const chunk of stream) yield ChunkPart.of(chunk);
    } catch (err) {
      throw this.mapError(err);
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
    // (before the SDK loaded, no error can be one of its classes)
    const Anthropic = this.sdk;
    if (Anthropic) {
      if (err instanceof Anthropic.APIUserAbortError) return err;
      if (err instanceof Anthropic.APIConnectionTimeoutError) return upstreamUnreachable(this.id, 'connection timed out');
      if (err instanceof Anthropic.APIConnectionError) {
        const cause = err.cause instanceof Error ? (err.cause.cause instanceof Error ? err.cause.cause : err.cause) : undefined;
        const code = cause && 'code' in cause && typeof cause.code === 'string' ? cause.code : undefined;
        return upstreamUnreachable(this.id, code ?? redact(cause?.message ?? 'connection failed', this.secrets));
      }
      if (err instanceof Anthropic.APIError) {
        // An `error` event inside the SSE stream has no HTTP status.
        if (err.status === undefined) return streamError(this.id, err.type, err.apiMessage, this.secrets);
        return fromAnthropicStatus({
          backend: this.id,
          status: err.status,
          type: err.type,
          message: err.apiMessage,
          errorCode: err.errorCode,
          retryAfter: err.headers ? retryAfterSeconds((n) => err.headers?.get(n)) : undefined,
          secrets: this.secrets,
        });
      }
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
