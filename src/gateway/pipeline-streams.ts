/**
 * Stream transforms the pipeline puts around an upstream stream: usage shaping (the client sees the
 * usage chunk only when it asked; the gateway always records it), an end hook that fires exactly
 * once however the stream stops, and replay of cached chunks.
 */
import type { AbortLike } from '../lib/abort.ts';
import type { Chunk, Usage } from './types.ts';
import { DONE, pollable, withEnd, type Pollable } from '../lib/pollable.ts';
import { addedUsageNull, droppedUsageNull, PlainChunk } from '../protocol/chat/event-text.ts';

/**
 * Drops the usage chunk (and `usage: null` fields) the client did not ask for; records usage. A
 * client that asked gets `usage: null` on every other chunk, as OpenAI sends it, whatever the
 * upstream wrote (llama-server and some OpenAI-compatible vendors omit the member).
 */
export function shapeUsage<T extends Chunk>(src: AsyncIterable<T>, clientWantsUsage: boolean, sink: { value: Usage | undefined }): AsyncIterableIterator<T> {
  return new ShapeUsage(src[Symbol.asyncIterator](), clientWantsUsage, sink);
}

class ShapeUsage<T extends Chunk> implements AsyncIterableIterator<T>, Pollable<T> {
  constructor(
    private readonly it: AsyncIterator<T>,
    private readonly clientWantsUsage: boolean,
    private readonly sink: { value: Usage | undefined },
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<T> | undefined {
    const p = pollable(this.it);
    if (!p) return undefined;
    for (;;) {
      const r = p.poll();
      if (r === undefined || r.done || this.shape(r.value)) return r;
    }
  }

  async next(): Promise<IteratorResult<T>> {
    for (;;) {
      const r = await this.it.next();
      if (r.done || this.shape(r.value)) return r;
    }
  }

  async return(v?: unknown): Promise<IteratorResult<T>> {
    return (await this.it.return?.(v)) ?? DONE;
  }

  /** Records the chunk's usage and shapes it for the client; false when the client does not get it. */
  private shape(chunk: T): boolean {
    // no usage (null at most), by its grammar
    if (chunk instanceof PlainChunk) {
      if (!this.clientWantsUsage) chunk.dropUsageNull();
      else if (chunk.usage === undefined) chunk.addUsageNull();
      return true;
    }
    if (chunk.usage) this.sink.value = chunk.usage;
    if (this.clientWantsUsage) {
      if (!('usage' in chunk)) {
        chunk.usage = null;
        addedUsageNull(chunk);
      }
      return true;
    }
    if (chunk.usage && chunk.choices.length === 0) return false;
    if ('usage' in chunk) {
      delete chunk.usage;
      droppedUsageNull(chunk);
    }
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

export async function* replay<T>(chunks: readonly unknown[]): AsyncGenerator<T> {
  for (const c of chunks) yield c as T;
}

