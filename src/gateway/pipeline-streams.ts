/**
 * Stream transforms the pipeline puts around an upstream stream of chunk parts: usage shaping (the
 * client sees the usage chunk only when it asked; the gateway always records it), an end hook that
 * fires exactly once however the stream stops, and replay of cached chunks.
 */
import type { AbortLike } from '../lib/abort.ts';
import type { Chunk, Usage } from './types.ts';
import { DONE, pollable, withEnd, type Pollable } from '../lib/pollable.ts';
import { ChunkPart, type EventPart, type StreamPart } from '../protocol/stream-part.ts';
import { eventFromLog, type StreamTap } from '../cache/flights.ts';

/** What differs between a stream of chunks and a stream of forwarded events on their way through. */
export interface StreamKind<P extends StreamPart> {
  /** the parts as the client gets them, their usage recorded into `sink` */
  read(src: AsyncIterable<P>, sink: { value: Usage | undefined }): AsyncIterable<P>;
  /** a coalescing log's parts, from the first, for one more reader */
  follow(tap: StreamTap, leave: () => void): AsyncIterable<P>;
  /** a cached stream's entries as parts */
  replay(entries: readonly unknown[]): AsyncIterable<P>;
}

/**
 * Drops the usage chunk (and `usage: null` fields) the client did not ask for; records usage. A
 * client that asked gets `usage: null` on every other chunk, as OpenAI sends it, whatever the
 * upstream wrote (llama-server and some OpenAI-compatible vendors omit the member).
 */
export function shapeUsage<C extends Chunk>(src: AsyncIterable<ChunkPart<C>>, clientWantsUsage: boolean, sink: { value: Usage | undefined }): AsyncIterableIterator<ChunkPart<C>> {
  return new ShapeUsage(src[Symbol.asyncIterator](), clientWantsUsage, sink);
}

type T<C extends Chunk> = ChunkPart<C>;

class ShapeUsage<C extends Chunk> implements AsyncIterableIterator<T<C>>, Pollable<T<C>> {
  constructor(
    private readonly it: AsyncIterator<T<C>>,
    private readonly clientWantsUsage: boolean,
    private readonly sink: { value: Usage | undefined },
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<T<C>> | undefined {
    const p = pollable(this.it);
    if (!p) return undefined;
    for (;;) {
      const r = p.poll();
      if (r === undefined || r.done || this.shape(r.value)) return r;
    }
  }

  async next(): Promise<IteratorResult<T<C>>> {
    for (;;) {
      const r = await this.it.next();
      if (r.done || this.shape(r.value)) return r;
    }
  }

  async return(v?: unknown): Promise<IteratorResult<T<C>>> {
    return (await this.it.return?.(v)) ?? DONE;
  }

  /**
   * Records the part's usage and shapes it for the client; false when the client does not get it.
   * Hot path: the part's own edits keep its text (a plain part is not parsed: its usage is null at
   * most, by its grammar).
   */
  private shape(part: T<C>): boolean {
    if (part.plain) {
      if (this.clientWantsUsage) part.addUsageNull();
      else part.dropUsage();
      return true;
    }
    const usage = part.usage();
    if (usage) this.sink.value = usage;
    if (this.clientWantsUsage) {
      part.addUsageNull();
      return true;
    }
    if (usage && part.chunk.choices.length === 0) return false;
    part.dropUsage();
    return true;
  }
}

/** Calls `onEnd` once when the stream ends, fails, is returned early, or the client goes away. */
export function ended<T>(src: AsyncIterable<T>, signal: AbortLike, onEnd: () => void): AsyncIterable<T> {
  let done = false;
  const finish = (): void => {
    if (done) return;
    done = true;
    signal.removeEventListener('abort', finish);
    onEnd();
  };
  signal.addEventListener('abort', finish, { once: true });
  return withEnd(src, finish);
}

/** A cached stream's chunks (parsed from the entry) as parts, printed when written. */
export async function* replay<C extends object>(chunks: readonly unknown[]): AsyncGenerator<ChunkPart<C>> {
  for (const c of chunks) yield ChunkPart.of(c as C);
}


/** Records the usage forwarded events tell (cumulative: the last one told wins); parts pass as they are. */
export function eventUsage(src: AsyncIterable<EventPart>, sink: { value: Usage | undefined }): AsyncIterableIterator<EventPart> {
  return new EventUsage(src[Symbol.asyncIterator](), sink);
}

class EventUsage implements AsyncIterableIterator<EventPart>, Pollable<EventPart> {
  constructor(
    private readonly it: AsyncIterator<EventPart>,
    private readonly sink: { value: Usage | undefined },
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<EventPart> | undefined {
    const r = pollable(this.it)?.poll();
    if (r !== undefined && !r.done && r.value.usage) this.sink.value = r.value.usage;
    return r;
  }

  async next(): Promise<IteratorResult<EventPart>> {
    const r = await this.it.next();
    if (!r.done && r.value.usage) this.sink.value = r.value.usage;
    return r;
  }

  async return(v?: unknown): Promise<IteratorResult<EventPart>> {
    return (await this.it.return?.(v)) ?? DONE;
  }
}

/** A cached event stream's entries as parts. */
export async function* replayEvents(entries: readonly unknown[]): AsyncGenerator<EventPart> {
  for (const e of entries) yield eventFromLog(e);
}
