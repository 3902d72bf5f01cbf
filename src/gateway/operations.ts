/**
 * chat / chatStream / complete / embed: what every route does between validation and the wire.
 * Each operation hands the pipeline (gateway/pipeline.ts: key's models → cache → limits → coalescing →
 * router → usage accounting) a description of the request — its prompt for the token reservation
 * — and how to call the router; the router substitutes the backend's model name. Streams always
 * ask upstream for usage; the client only sees the usage chunk when it asked for it.
 */
import type { AbortLike } from '../lib/abort.ts';
import type { CallContext } from '../backends/contract.ts';
import { chatPrompt, completionPrompt, embeddingPrompt, outputReserve } from '../limits/estimate.ts';
import { Pipeline, type Answer, type CacheControl, type Job, type PipelineServices, type StreamResult } from './pipeline.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../protocol/chat/schema.ts';
import type { Completion, CompletionRequest } from '../protocol/completions/schema.ts';
import { encodeEmbeddings, RawEmbeddingResponse, type EmbeddingAnswer, type EmbeddingRequest } from '../protocol/embeddings/schema.ts';
import type { ChunkPart, DeepReadonly, EventPart } from '../protocol/stream-part.ts';
import type { JsonObject } from '../backends/contract.ts';
import { nativeCall, nativeOnce, nativeStream, translatedEvents } from './ingress.ts';
import type { ClientProtocol, ClientTurn } from '../protocol/client-protocol.ts';
import type { Operation, RouteRequest, RouteTrace, Router, StreamHooks } from '../router/router.ts';
import { GatewayError, modelNotFound } from '../errors/gateway-error.ts';
import { countPrompt } from '../limits/estimate.ts';
import { encodingFor } from '../limits/tokens.ts';
import type { StateStore } from '../state/store/contract.ts';
import { Affinity, type Preferred } from './affinity.ts';

export type { Answer, Served, StreamResult } from './pipeline.ts';

/** Per-request facts from the HTTP layer that steer routing, limits and the cache. */
export interface RequestFacts {
  requestId: string;
  signal: AbortLike;
  /** the request's trace while tracing is on (its attempts' spans hang under it) */
  trace?: RouteTrace | undefined;
  /** request header x-switchyard-backend */
  pinBackend?: string | undefined;
  /** the tighter of x-switchyard-deadline-ms and the OpenAI SDK's x-stainless-timeout */
  deadlineMs?: number | undefined;
  /** the API key's name: limits, cache namespace, allowed models, sticky weighted routing */
  keyName?: string | undefined;
  /** size of the request body, for a cheap prompt-token estimate */
  bodyBytes: number;
  /** the client's Cache-Control: no-cache (refresh) / no-store (bypass) */
  cacheControl?: CacheControl | undefined;
  /** session affinity: request header x-session-id */
  sessionId?: string | undefined;
  /** session affinity: an agent CLI's session header (x-claude-code-session-id, session-id, session_id) */
  agentSessionId?: string | undefined;
}

/** A plain part answers from its text (no parse); any other from its chunk. */
const chatHooks: StreamHooks<ChunkPart<ChatCompletionChunk>> = {
  commits: (p) => (p.plain ? p.finishes || p.deltaCarries() : undefined) ?? parsedCommits(p.chunk),
  completes: (p) => (p.plain ? p.finishes : p.chunk.choices.some((ch) => !!ch.finish_reason)),
};

function parsedCommits(c: DeepReadonly<ChatCompletionChunk>): boolean {
  return (
    (c.usage !== undefined && c.usage !== null) ||
    c.choices.some((ch) => {
      const d = ch.delta as Record<string, unknown> | undefined;
      if (ch.finish_reason) return true;
      if (!d) return false;
      for (const [k, v] of Object.entries(d)) {
        if (k === 'role') continue;
        if (v === null || v === undefined || v === '') continue;
        return true;
      }
      return false;
    })
  );
}

/** A forwarded or translated event says itself whether it is content and whether it ends the answer. */
const eventHooks: StreamHooks<EventPart> = {
  commits: (p) => p.content,
  completes: (p) => p.final,
};

const completionHooks: StreamHooks<ChunkPart<Completion>> = {
  commits: (p) => {
    const c = p.chunk;
    return (c.usage !== undefined && c.usage !== null) || c.choices.some((ch) => ch.text !== '' || !!ch.finish_reason);
  },
  completes: (p) => (p.plain ? p.finishes : p.chunk.choices.some((ch) => !!ch.finish_reason)),
};

function route(op: Operation, model: string, info: RequestFacts, signal: AbortLike, stream: boolean, maxOutputTokens: number | null | undefined, prefer: Preferred): RouteRequest {
  return {
    publicModel: model,
    op,
    requestId: info.requestId,
    signal,
    stream,
    trace: info.trace,
    pinBackend: info.pinBackend,
    deadlineMs: info.deadlineMs,
    stickyKey: info.keyName,
    preferTarget: prefer,
    // about four bytes of JSON per token: good enough to rank targets by price
    promptTokens: Math.ceil(info.bodyBytes / 4),
    maxOutputTokens: maxOutputTokens ?? undefined,
  };
}

/** The members of a stream request that withUpstreamUsage sets. */
type StreamFields = { model: string; stream?: boolean | null | undefined; stream_options?: { include_usage?: boolean | null | undefined } | null | undefined };

/**
 * The upstream request of a stream: the client's, with the backend's model name, asking for usage.
 * Hot path: copied member by member, since `{ ...req, model, stream: true, stream_options }` takes
 * V8's slow path for members redefined after a spread.
 */
function withUpstreamUsage<R extends StreamFields>(req: R, model: string): R {
  const out = {} as R;
  for (const k in req) out[k] = req[k];
  const o: StreamFields = out;
  o.model = model;
  o.stream = true;
  o.stream_options = req.stream_options ? { ...req.stream_options, include_usage: true } : { include_usage: true };
  return out;
}

function job(op: Operation, body: Job['body'], info: RequestFacts, prompt: Job['prompt'], reserve: number): Job {
  return { op, body, info, prompt, reserve };
}

export class Operations {
  private readonly pipeline: Pipeline;
  private readonly affinity: Affinity;

  /** `services.store` holds session-affinity pins (without one, affinity is off). */
  constructor(
    private readonly router: Router,
    private readonly services: PipelineServices & { store?: StateStore | undefined },
  ) {
    this.pipeline = new Pipeline(router, services);
    this.affinity = new Affinity(services.config, router, services.store);
  }

  /** Public model names, only those the key may use. */
  models(keyName?: string): string[] {
    return this.pipeline.models(keyName);
  }

  /**
   * Whether a request for `name` reaches a model this key may use: a listed name, an alias, or a
   * name a pattern serves, checked as the pipeline checks a request.
   */
  servesModel(name: string, keyName?: string): boolean {
    const key = this.router.modelKey(name);
    if (key === undefined) return false;
    const allowed = this.pipeline.principal(keyName)?.models;
    return allowed === undefined || allowed.includes(key);
  }

  /** The backend types of the targets that serve `name`, in the model's order (none for an unknown name). */
  backendTypes(name: string): string[] {
    return this.router.modelKey(name) === undefined ? [] : this.router.resolve(name).map((t) => t.entry.config.type);
  }

  /**
   * A Messages request's input tokens (`/v1/messages/count_tokens`): counted by the upstream when
   * the model's first target speaks the Messages API natively, else — or when that upstream fails —
   * estimated with the gateway's tokenizer (the encoding of the model's first target). 404 for a
   * model that does not exist or is outside the key's list. Not routed: no limits, no breaker.
   */
  async countTokens(body: JsonObject & { model: string }, prompt: { texts: string[]; fixed: number }, info: RequestFacts, headers?: Record<string, string>): Promise<{ tokens: number; by: 'upstream' | 'estimate'; backend?: string }> {
    const model = body.model;
    const p = this.pipeline.principal(info.keyName);
    if (p?.models && !p.models.includes(this.router.modelKey(model) ?? model)) throw modelNotFound(model);
    const first = this.router.resolve(model)[0];
    const native = first?.entry.llm.countMessageTokens;
    if (first && native && !first.entry.unconfigured) {
      try {
        const ctx = { signal: AbortSignal.timeout(first.entry.config.timeout_ms), requestId: info.requestId };
        const r = await native.call(first.entry.llm, { body: { ...body, model: first.model }, headers }, ctx);
        return { tokens: r.input_tokens as number, by: 'upstream', backend: first.backend };
      } catch {
        // an estimate serves the client better than an error here
      }
    }
    return { tokens: await countPrompt(this.services.tokens, encodingFor(first?.model ?? model), prompt), by: 'estimate' };
  }

  private reserveDefault(): number {
    return this.services.config.limits.default_max_tokens;
  }

  chat(req: ChatRequest, info: RequestFacts): Promise<Answer<ChatCompletion>> {
    const maxOut = req.max_completion_tokens ?? req.max_tokens;
    const j = job('chat', req, info, chatPrompt(req), outputReserve(maxOut, req.n, this.reserveDefault()));
    return this.pipeline.once(j, (signal) =>
      this.affinity.route(this.affinity.session('chat', req, info), (prefer) =>
        this.router.run(route('chat', req.model, info, signal, false, maxOut, prefer), (t, ctx) => {
          const llm = t.entry.llm;
          if (!llm.chat) throw missing(t.backend, 'chat');
          return llm.chat({ ...req, model: t.model }, ctx);
        }),
      ),
    );
  }

  chatStream(req: ChatRequest, info: RequestFacts): Promise<StreamResult<ChunkPart<ChatCompletionChunk>>> {
    const maxOut = req.max_completion_tokens ?? req.max_tokens;
    const j = job('chat', req, info, chatPrompt(req), outputReserve(maxOut, req.n, this.reserveDefault()));
    return this.pipeline.stream(j, req.stream_options?.include_usage === true, (signal) =>
      this.affinity.routeStream(this.affinity.session('chat', req, info), (prefer) =>
        this.router.runStream(
          route('chat', req.model, info, signal, true, maxOut, prefer),
          (t, ctx: CallContext) => {
            const llm = t.entry.llm;
            if (!llm.chatStream) throw missing(t.backend, 'streaming chat');
            return llm.chatStream(withUpstreamUsage(req, t.model), ctx);
          },
          chatHooks,
        ),
      ),
    );
  }

  complete(req: CompletionRequest, info: RequestFacts): Promise<Answer<Completion>> {
    const j = job('completions', req, info, completionPrompt(req), outputReserve(req.max_tokens, req.n, this.reserveDefault()));
    return this.pipeline.once(j, (signal) =>
      this.affinity.route(this.affinity.session('completions', req, info), (prefer) =>
        this.router.run(route('completions', req.model, info, signal, false, req.max_tokens, prefer), (t, ctx) => {
          const llm = t.entry.llm;
          if (!llm.complete) throw missing(t.backend, 'completions');
          return llm.complete({ ...req, model: t.model }, ctx);
        }),
      ),
    );
  }

  completeStream(req: CompletionRequest, info: RequestFacts): Promise<StreamResult<ChunkPart<Completion>>> {
    const j = job('completions', req, info, completionPrompt(req), outputReserve(req.max_tokens, req.n, this.reserveDefault()));
    return this.pipeline.stream(j, req.stream_options?.include_usage === true, (signal) =>
      this.affinity.routeStream(this.affinity.session('completions', req, info), (prefer) =>
        this.router.runStream(
          route('completions', req.model, info, signal, true, req.max_tokens, prefer),
          (t, ctx) => {
            const llm = t.entry.llm;
            if (!llm.completeStream) throw missing(t.backend, 'streaming completions');
            return llm.completeStream(withUpstreamUsage(req, t.model), ctx);
          },
          completionHooks,
        ),
      ),
    );
  }

  /**
   * A client protocol's JSON answer (Responses, Messages: gateway/ingress.ts): natively from a
   * backend that speaks the protocol, else through its chat method and back.
   */
  async ingress<Req, T extends ClientTurn<Req>>(p: ClientProtocol<Req, T>, turn: T, info: RequestFacts): Promise<Answer<JsonObject>> {
    const body = turn.nativeBody;
    const maxOut = p.maxOutputTokensOf(turn);
    const j = job(p.op, body, info, p.promptOf(turn), outputReserve(maxOut, 1, this.reserveDefault()));
    let chat: ChatRequest | undefined;
    const r = await this.pipeline.once(
      j,
      (signal) =>
        this.affinity.route(this.affinity.session(p.op, body, info), (prefer) =>
          this.router.run(route(p.op, body.model, info, signal, false, maxOut, prefer), async (t, ctx) => {
            const llm = t.entry.llm;
            const native = nativeOnce(llm, p.op);
            if (native) return native(nativeCall(turn, t.model, false), ctx);
            if (!llm.chat) throw missing(t.backend, 'chat');
            chat ??= p.toChat(turn, this.backendTypes(body.model));
            return p.fromChat(await llm.chat({ ...chat, model: t.model }, ctx), turn);
          }),
        ),
      (answer) => p.usageOf(answer),
    );
    if (p.nativeWarnings && nativeOnce(r.target.entry.llm, p.op)) turn.warnings.push(...p.nativeWarnings(turn));
    return r;
  }

  /** A client protocol's event stream: forwarded from a native backend, or translated from chat. */
  async ingressStream<Req, T extends ClientTurn<Req>>(p: ClientProtocol<Req, T>, turn: T, info: RequestFacts): Promise<StreamResult<EventPart>> {
    const body = turn.nativeBody;
    const maxOut = p.maxOutputTokensOf(turn);
    const j = job(p.op, body, info, p.promptOf(turn), outputReserve(maxOut, 1, this.reserveDefault()));
    let chat: ChatRequest | undefined;
    const s = await this.pipeline.events(j, (signal) =>
      this.affinity.routeStream(this.affinity.session(p.op, body, info), (prefer) =>
        this.router.runStream(
          route(p.op, body.model, info, signal, true, maxOut, prefer),
          async (t, ctx) => {
            const llm = t.entry.llm;
            const native = nativeStream(llm, p.op);
            if (native) return native(nativeCall(turn, t.model, true), ctx);
            if (!llm.chatStream) throw missing(t.backend, 'streaming chat');
            chat ??= p.toChat(turn, this.backendTypes(body.model));
            // counted while the upstream answers; the tokenizer's count is usually there first
            const counting = p.streamOpensWithInputTokens ? this.pipeline.promptTokens(j, t.model) : undefined;
            const chunks = await llm.chatStream(withUpstreamUsage(chat, t.model), ctx);
            return translatedEvents(chunks, p.streamFromChat(turn, counting === undefined ? undefined : await counting));
          },
          eventHooks,
        ),
      ),
    );
    if (p.nativeWarnings && nativeStream(s.target.entry.llm, p.op)) turn.warnings.push(...p.nativeWarnings(turn));
    return s;
  }

  embed(req: EmbeddingRequest, info: RequestFacts): Promise<Answer<EmbeddingAnswer>> {
    const j = job('embeddings', req, info, embeddingPrompt(req), 0);
    return this.pipeline.once(j, async (signal) => {
      const routed = await this.router.run(route('embeddings', req.model, info, signal, false, 0, undefined), (t, ctx) => {
        const llm = t.entry.llm;
        if (!llm.embed) throw missing(t.backend, 'embeddings');
        return llm.embed({ ...req, model: t.model }, ctx);
      });
      // forwarded bytes were checked to be in the asked format and in order already
      if (routed.result instanceof RawEmbeddingResponse) return routed;
      encodeEmbeddings(routed.result, req.encoding_format);
      routed.result.data.sort((a, b) => a.index - b.index);
      return routed;
    });
  }
}

function missing(backend: string, what: string): GatewayError {
  return new GatewayError('model_not_supported', `Backend "${backend}" does not support ${what}.`);
}
