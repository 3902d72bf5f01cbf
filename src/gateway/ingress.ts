/**
 * A client protocol other than chat (OpenAI's Responses API, Anthropic's Messages API) as one
 * request through the pipeline and the router. Each target is reached the best way it can be:
 * natively when its backend speaks the protocol (the client's body with only `model` replaced, the
 * answer or its events forwarded), else translated through the canonical chat form. Both kinds of
 * target are in one attempt chain, so a request fails over between them before its commit point.
 *
 * Each protocol is an adapter (protocol/client-protocol.ts: protocol/responses/adapter.ts,
 * protocol/messages/adapter.ts) with its request's turn; the operations (gateway/operations.ts)
 * run any of them with the helpers here.
 */
import type { BaseLLM, CallContext, JsonObject, NativeCall } from '../backends/contract.ts';
import type { ChatCompletionChunk } from '../protocol/chat/schema.ts';
import { chunkOf, type ChunkPart, type EventPart, type PartUsage } from '../protocol/stream-part.ts';
import type { ClientOp, ClientTurn, StreamTranslator } from '../protocol/client-protocol.ts';
import { ContentHead, plainContent } from '../protocol/chat/content-text.ts';
import { DONE, pollable, type Pollable } from '../lib/pollable.ts';

type NativeOnce = (call: NativeCall, ctx: CallContext) => Promise<JsonObject>;
type NativeStream = (call: NativeCall, ctx: CallContext) => Promise<AsyncIterable<EventPart>>;

/** The backend's own method for this protocol's JSON answer, or undefined (translate). */
export function nativeOnce(llm: BaseLLM, op: ClientOp): NativeOnce | undefined {
  const m = op === 'responses' ? llm.responses : llm.messages;
  return m?.bind(llm);
}

/** The backend's own method for this protocol's stream, or undefined (translate). */
export function nativeStream(llm: BaseLLM, op: ClientOp): NativeStream | undefined {
  const m = op === 'responses' ? llm.responsesStream : llm.messagesStream;
  return m?.bind(llm);
}

/** The client's body with the backend's model name (and `stream` as the call wants it). */
export function nativeCall(turn: ClientTurn<unknown>, model: string, stream: boolean): NativeCall {
  const body: JsonObject = {};
  for (const k in turn.nativeBody) body[k] = turn.nativeBody[k];
  body.model = model;
  if (stream) body.stream = true;
  else delete body.stream;
  return { body, headers: turn.nativeHeaders };
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
