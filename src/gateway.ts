/**
 * chat / chatStream / complete / embed: what every route does between validation and the wire.
 * Resolves the public model through the router, substitutes the backend's model name, and keeps
 * usage flowing for accounting (streams always ask upstream for usage; the client only sees the
 * usage chunk when it asked for it).
 */
import type { CallContext } from './backends/base-llm.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from './protocol/chat.ts';
import type { Completion, CompletionRequest } from './protocol/completions.ts';
import { encodeEmbeddings, type EmbeddingRequest, type EmbeddingResponse } from './protocol/embeddings.ts';
import type { Operation, RouteRequest, Routed, Router, StreamHooks } from './router/router.ts';
import { GatewayError } from './errors.ts';

/** Per-request facts from the HTTP layer that steer routing. */
export interface RequestInfo {
  requestId: string;
  signal: AbortSignal;
  /** request header x-switchyard-backend */
  pinBackend?: string | undefined;
  /** the tighter of x-switchyard-deadline-ms and the OpenAI SDK's x-stainless-timeout */
  deadlineMs?: number | undefined;
  /** the API key's name, for sticky weighted routing */
  keyName?: string | undefined;
  /** size of the request body, for a cheap prompt-token estimate */
  bodyBytes: number;
}

type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };

export interface StreamResult<T> extends Routed<AsyncIterable<T>> {
  /** Filled in when the upstream reported usage (read it after the stream ends). */
  usage: { value: Usage | undefined };
}

const chatHooks: StreamHooks<ChatCompletionChunk> = {
  commits: (c) =>
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
    }),
  completes: (c) => c.choices.some((ch) => !!ch.finish_reason),
};

const completionHooks: StreamHooks<Completion> = {
  commits: (c) => (c.usage !== undefined && c.usage !== null) || c.choices.some((ch) => ch.text !== '' || !!ch.finish_reason),
  completes: (c) => c.choices.some((ch) => !!ch.finish_reason),
};

function route(op: Operation, model: string, info: RequestInfo, stream: boolean, maxOutputTokens: number | null | undefined): RouteRequest {
  return {
    publicModel: model,
    op,
    requestId: info.requestId,
    signal: info.signal,
    stream,
    pinBackend: info.pinBackend,
    deadlineMs: info.deadlineMs,
    stickyKey: info.keyName,
    // about four bytes of JSON per token: good enough to rank targets by price
    promptTokens: Math.ceil(info.bodyBytes / 4),
    maxOutputTokens: maxOutputTokens ?? undefined,
  };
}

function withUpstreamUsage<R extends { stream_options?: { include_usage?: boolean | undefined } | null | undefined }>(req: R, model: string): R {
  return { ...req, model, stream: true, stream_options: { ...(req.stream_options ?? {}), include_usage: true } };
}

/** Drops the usage chunk (and `usage: null` fields) the client did not ask for; records usage. */
async function* shapeUsage<T extends { usage?: Usage | null; choices: unknown[] }>(
  src: AsyncIterable<T>,
  clientWantsUsage: boolean,
  sink: { value: Usage | undefined },
): AsyncGenerator<T> {
  for await (const chunk of src) {
    if (chunk.usage) sink.value = chunk.usage;
    if (clientWantsUsage) {
      yield chunk;
      continue;
    }
    if (chunk.usage && chunk.choices.length === 0) continue;
    if ('usage' in chunk) delete chunk.usage;
    yield chunk;
  }
}

export class Gateway {
  constructor(private readonly router: Router) {}

  models(): string[] {
    return this.router.publicModels();
  }

  chat(req: ChatRequest, info: RequestInfo): Promise<Routed<ChatCompletion>> {
    return this.router.run(route('chat', req.model, info, false, req.max_completion_tokens ?? req.max_tokens), (t, ctx) => {
      const llm = t.entry.llm;
      if (!llm.chat) throw missing(t.backend, 'chat');
      return llm.chat({ ...req, model: t.model }, ctx);
    });
  }

  async chatStream(req: ChatRequest, info: RequestInfo): Promise<StreamResult<ChatCompletionChunk>> {
    const wantsUsage = req.stream_options?.include_usage === true;
    const routed = await this.router.runStream(
      route('chat', req.model, info, true, req.max_completion_tokens ?? req.max_tokens),
      (t, ctx: CallContext) => {
        const llm = t.entry.llm;
        if (!llm.chatStream) throw missing(t.backend, 'streaming chat');
        return llm.chatStream(withUpstreamUsage(req, t.model), ctx);
      },
      chatHooks,
    );
    const usage: { value: Usage | undefined } = { value: undefined };
    return { ...routed, result: shapeUsage(routed.result, wantsUsage, usage), usage };
  }

  complete(req: CompletionRequest, info: RequestInfo): Promise<Routed<Completion>> {
    return this.router.run(route('completions', req.model, info, false, req.max_tokens), (t, ctx) => {
      const llm = t.entry.llm;
      if (!llm.complete) throw missing(t.backend, 'completions');
      return llm.complete({ ...req, model: t.model }, ctx);
    });
  }

  async completeStream(req: CompletionRequest, info: RequestInfo): Promise<StreamResult<Completion>> {
    const wantsUsage = req.stream_options?.include_usage === true;
    const routed = await this.router.runStream(
      route('completions', req.model, info, true, req.max_tokens),
      (t, ctx) => {
        const llm = t.entry.llm;
        if (!llm.completeStream) throw missing(t.backend, 'streaming completions');
        return llm.completeStream(withUpstreamUsage(req, t.model), ctx);
      },
      completionHooks,
    );
    const usage: { value: Usage | undefined } = { value: undefined };
    return { ...routed, result: shapeUsage(routed.result, wantsUsage, usage), usage };
  }

  async embed(req: EmbeddingRequest, info: RequestInfo): Promise<Routed<EmbeddingResponse>> {
    const routed = await this.router.run(route('embeddings', req.model, info, false, 0), (t, ctx) => {
      const llm = t.entry.llm;
      if (!llm.embed) throw missing(t.backend, 'embeddings');
      return llm.embed({ ...req, model: t.model }, ctx);
    });
    encodeEmbeddings(routed.result, req.encoding_format);
    routed.result.data.sort((a, b) => a.index - b.index);
    return routed;
  }
}

function missing(backend: string, what: string): GatewayError {
  return new GatewayError(`Backend "${backend}" does not support ${what}.`, {
    status: 400,
    type: 'invalid_request_error',
    code: 'model_not_supported',
  });
}
