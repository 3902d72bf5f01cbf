/**
 * A client protocol other than chat (OpenAI's Responses API, Anthropic's Messages API) as one
 * request through the pipeline and the router. Each target is reached the best way it can be:
 * natively when its backend speaks the protocol (the client's body with only `model` replaced, the
 * answer or its events forwarded), else translated through the canonical chat form. Both kinds of
 * target are in one attempt chain, so a request fails over between them before its commit point.
 *
 * The protocol folders (protocol/responses, protocol/messages) provide the translations; the route
 * builds an IngressRequest from them; this file runs it.
 */
import type { BaseLLM, CallContext, JsonObject, NativeCall } from '../backends/contract.ts';
import type { ChatCompletion, ChatCompletionChunk, ChatRequest } from '../protocol/chat/schema.ts';
import { chunkOf, type ChunkPart, type EventPart, type PartUsage } from '../protocol/stream-part.ts';
import type { StreamTranslator } from '../protocol/client-protocol.ts';
import { ContentHead, plainContent } from '../protocol/chat/content-text.ts';
import type { Job } from './pipeline.ts';
import type { Usage } from './types.ts';
import { DONE, pollable, type Pollable } from '../lib/pollable.ts';

/** One request of a client protocol other than chat, ready for the gateway. */
export interface IngressRequest {
  op: 'responses' | 'messages';
  /** the client's body: what a native backend gets (with its model name), and the cache key's part */
  body: JsonObject & { model: string; temperature?: number | null | undefined };
  /** protocol headers the client sent that a native upstream should see */
  headers?: Record<string, string> | undefined;
  /** the canonical chat request, for a translating backend (called at most once, when one is tried) */
  chat(): ChatRequest;
  /** a translated answer in the client's protocol */
  fromChat(completion: ChatCompletion): JsonObject;
  /**
   * A new translator for one translated stream. `inputTokens`: the prompt's tokens as the gateway
   * counts them, given when `opensWithInputTokens` (else undefined).
   */
  translator(inputTokens: number | undefined): StreamTranslator;
  /**
   * The protocol's stream opens with the prompt's tokens (Messages' `message_start`), before the
   * upstream reports its usage at the end: the gateway counts them while the upstream answers.
   */
  opensWithInputTokens?: boolean;
  /** a JSON answer's usage in the gateway's terms */
  usageOf(answer: JsonObject): Usage | undefined;
  /** the prompt, for the token reservation */
  prompt: Job['prompt'];
  /** the client's output limit (max_output_tokens / max_tokens), for the reservation and the cost policy */
  maxOutputTokens: number | undefined;
}

type NativeOnce = (call: NativeCall, ctx: CallContext) => Promise<JsonObject>;
type NativeStream = (call: NativeCall, ctx: CallContext) => Promise<AsyncIterable<EventPart>>;

/** The backend's own method for this protocol's JSON answer, or undefined (translate). */
export function nativeOnce(llm: BaseLLM, op: IngressRequest['op']): NativeOnce | undefined {
  const m = op === 'responses' ? llm.responses : llm.messages;
  return m?.bind(llm);
}

/** The backend's own method for this protocol's stream, or undefined (translate). */
export function nativeStream(llm: BaseLLM, op: IngressRequest['op']): NativeStream | undefined {
  const m = op === 'responses' ? llm.responsesStream : llm.messagesStream;
  return m?.bind(llm);
}

/** The client's body with the backend's model name (and `stream` as the call wants it). */
export function nativeCall(req: IngressRequest, model: string, stream: boolean): NativeCall {
  const body: JsonObject = {};
  for (const k in req.body) body[k] = req.body[k];
  body.model = model;
  if (stream) body.stream = true;
  else delete body.stream;
  return { body, headers: req.headers };
}

/**
 * A translating backend's chat stream as the protocol's events: the translator's opening events,
 * then its events for each chunk, then its closing ones with the stream's usage. A failure of the
 * chat stream passes through (the route ends the client's stream with the protocol's error event).
 * Hot path: a class, not an async generator, so a chunk already read is translated and handed on
 * by `poll()` without a promise per event (lib/pollable.ts).
 */
export function translatedEvents(chunks: AsyncIterable<ChunkPart<ChatCompletionChunk>>, tr: StreamTranslator): AsyncIterableIterator<EventPart> {
  return new TranslatedEvents(chunks[Symbol.asyncIterator](), tr);
}

class TranslatedEvents implements AsyncIterableIterator<EventPart>, Pollable<EventPart> {
  private queue: EventPart[];
  private head = 0;
  private usage: PartUsage | undefined;
  private ended = false;
  private readonly contentHead = new ContentHead();

  constructor(
    private readonly src: AsyncIterator<ChunkPart<ChatCompletionChunk>>,
    private readonly tr: StreamTranslator,
  ) {
    this.queue = tr.start();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<EventPart> | undefined {
    for (;;) {
      const queued = this.take();
      if (queued !== undefined || this.ended) return queued ?? DONE;
      const r = pollable(this.src)?.poll();
      if (r === undefined) return undefined;
      this.accept(r);
    }
  }

  async next(): Promise<IteratorResult<EventPart>> {
    for (;;) {
      const ready = this.poll();
      if (ready !== undefined) return ready;
      this.accept(await this.src.next());
    }
  }

  async return(v?: unknown): Promise<IteratorResult<EventPart>> {
    this.ended = true;
    this.queue = [];
    await this.src.return?.(v);
    return DONE;
  }

  private take(): IteratorResult<EventPart> | undefined {
    if (this.head >= this.queue.length) return undefined;
    const value = this.queue[this.head++] as EventPart;
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
    }
    return { done: false, value };
  }

  /** One result of the chat stream: its chunk's events queued, or the closing ones at its end. */
  private accept(r: IteratorResult<ChunkPart<ChatCompletionChunk>>): void {
    if (r.done) {
      this.ended = true;
      this.queue = this.tr.finish(this.usage);
      this.head = 0;
      return;
    }
    const part = r.value;
    // hot path: an ordinary token goes from its text to its events, neither parsed nor printed;
    // a plain chunk that carries nothing (the role chunk) has no events
    if (part.plain && !part.finishes) {
      const escaped = this.tr.text ? plainContent(part.json(), this.contentHead) : undefined;
      if (escaped !== undefined) {
        this.tr.text?.(escaped, this.queue);
        return;
      }
      if (part.deltaCarries() === false) return;
    }
    const chunk = chunkOf(part);
    if (chunk.usage) this.usage = chunk.usage;
    this.queue = this.queue.length === 0 ? this.tr.push(chunk) : this.queue.concat(this.tr.push(chunk));
  }
}
