/**
 * The BaseLLM contract: everything the gateway can send a request to, remote or local.
 * Requests and responses are the OpenAI wire shapes; `req.model` is already the backend's own
 * model name (the router substitutes it for the public name).
 */
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../protocol/chat/schema.ts';
import type { ChunkPart, EventPart } from '../protocol/stream-part.ts';
import type { Completion, CompletionRequest } from '../protocol/completions/schema.ts';
import type { EmbeddingAnswer, EmbeddingRequest } from '../protocol/embeddings/schema.ts';
import type { EventEmitter } from 'node:events';
import type { BackendType } from '../config/schema.ts';
import type { TraceIds } from '../telemetry/logger.ts';

/**
 * An attempt's trace as a backend sees it (telemetry/tracing-attempt.ts's AttemptTrace while
 * tracing is on): the trace context its upstream call carries and what its span learns of the call.
 */
export interface CallTrace {
  /** `traceparent` (and `tracestate`) for the upstream call's headers */
  readonly headers: Readonly<Record<string, string>>;
  /** the ids the request's log lines carry (its SERVER span's) */
  readonly request: TraceIds;
  /** The call as sent: the upstream's origin, and the body (request parameters, opted-in content). */
  call(origin: string, body: unknown): void;
}

export interface CallContext {
  /** Aborted when the client goes away, the deadline passes or the gateway gives up on this attempt. */
  signal: AbortSignal;
  /**
   * The same abort as an EventEmitter with `aborted` and `reason`, which undici takes in place of
   * an AbortSignal at a fraction of its cost (router attempts give one; HTTP backends prefer it).
   */
  abort?: UpstreamAbort | undefined;
  requestId: string;
  /** the attempt's trace while tracing is on (router attempts only) */
  trace?: CallTrace | undefined;
}

/** A JSON object as a native protocol carries it. */
export type JsonObject = Record<string, unknown>;

/** A request in the client's own protocol, for a backend that speaks it. */
export interface NativeCall {
  /** the client's body, `model` already the backend's name (and `stream` as the call wants it) */
  body: JsonObject;
  /** protocol headers the client sent that the upstream should see (anthropic-version, anthropic-beta) */
  headers?: Record<string, string> | undefined;
}

export type UpstreamAbort = EventEmitter & { readonly aborted: boolean; readonly reason: unknown };

export interface Capabilities {
  chat: boolean;
  embeddings: boolean;
  completions: boolean;
}

export interface BackendHealth {
  /** Serving requests. */
  ok: boolean;
  /** Loaded and able to take traffic (false while a local model loads). */
  ready: boolean;
  detail?: string;
}

export interface Capacity {
  /** parallel requests the backend can serve */
  total: number;
  /** requests it is serving now */
  busy: number;
}

export interface BaseLLM {
  /** Backend name from providers.yaml. */
  readonly id: string;
  readonly type: BackendType;
  readonly capabilities: Capabilities;
  chat?(req: ChatRequest, ctx: CallContext): Promise<ChatCompletion>;
  /** Resolves once the upstream accepted the request (headers received); chunk parts arrive as they come. */
  chatStream?(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<ChunkPart<ChatCompletionChunk>>>;
  complete?(req: CompletionRequest, ctx: CallContext): Promise<Completion>;
  completeStream?(req: CompletionRequest, ctx: CallContext): Promise<AsyncIterable<ChunkPart<Completion>>>;
  /**
   * Native ingress protocols. A backend that speaks the client's protocol itself (OpenAI's
   * Responses API, Anthropic's Messages API) gets the client's body with only `model` replaced and
   * answers in that protocol: the JSON answer parsed, or the stream's events forwarded as they came
   * (EventPart, with usage, content and end read on the way). Without them the gateway translates
   * through `chat` / `chatStream`.
   */
  responses?(call: NativeCall, ctx: CallContext): Promise<JsonObject>;
  responsesStream?(call: NativeCall, ctx: CallContext): Promise<AsyncIterable<EventPart>>;
  messages?(call: NativeCall, ctx: CallContext): Promise<JsonObject>;
  messagesStream?(call: NativeCall, ctx: CallContext): Promise<AsyncIterable<EventPart>>;
  /** Messages API `count_tokens` counted by the upstream itself (`{"input_tokens": n}`). */
  countMessageTokens?(call: NativeCall, ctx: CallContext): Promise<JsonObject>;
  /** Parsed vectors, or (HTTP backends) the upstream's checked bytes to forward as they are. */
  embed?(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingAnswer>;
  /** Cheap, never a billable call. */
  health?(ctx: CallContext): Promise<BackendHealth>;
  /**
   * Local backends: get ready to serve (load a model, wait for a server to finish loading).
   * Called once at start-up; `/ready` answers 503 until every backend's `load` has settled, and a
   * backend whose `load` failed answers 503 `backend_not_ready` instead of being called. A remote
   * backend's `load` (an SDK import) is awaited before the gateway serves: it is never "loading".
   */
  load?(): Promise<void>;
  /**
   * Local backends that keep checking after their `load` failed (a server that comes up late):
   * resolves once the backend is ready after all; the registry then marks it ready again.
   */
  whenReady?(): Promise<void>;
  /**
   * Local backends: how busy the server is right now (from llama-server's /slots, an in-process
   * queue, …), or undefined when unknown. The router prefers idle targets and treats a full one as
   * busy, not broken.
   */
  capacity?(): Capacity | undefined;
  /** Releases pooled connections and timers. */
  close?(): Promise<void>;
}
