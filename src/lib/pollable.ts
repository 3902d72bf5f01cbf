/**
 * Stream layers that can hand over a chunk that is ready now without a promise. A stream read from
 * one upstream read holds many chunks at once; passing each through every layer (the upstream
 * reader, the router's commit and idle-timeout layer, usage shaping, the end hook) by `await`
 * costs a promise and a microtask per chunk and layer. A layer that implements `poll()` gives the
 * next result when it is known synchronously, so the SSE writer pulls a ready batch in a plain
 * loop and awaits `next()` only when the data is not there yet.
 *
 * `poll()` returns what `next()` would resolve with (a chunk, or the end), throws what `next()`
 * would reject with, or returns undefined when only `next()` can tell (nothing is consumed then).
 * Calls are sequential: `poll()` is never called while a `next()` is pending.
 */
export interface Pollable<T> extends AsyncIterator<T> {
  poll(): IteratorResult<T> | undefined;
}

export function pollable<T>(it: AsyncIterator<T>): Pollable<T> | undefined {
  return typeof (it as Partial<Pollable<T>>).poll === 'function' ? (it as Pollable<T>) : undefined;
}

/**
 * A source that can be told its consumer takes PlainChunks (event-text.ts): chunks that provably
 * carry no error and no usage, kept as their text instead of parsed. The router says so when it
 * opens a stream (stream.ts): it reads the commit point and the answer's completion from the
 * chunk's own `deltaCarries()` and `finishes`. A source not told keeps handing over parsed chunks.
 */
export interface PlainAware {
  acceptPlain(): void;
}

export function acceptPlain(it: AsyncIterator<unknown>): void {
  const f = (it as Partial<PlainAware>).acceptPlain;
  if (typeof f === 'function') f.call(it);
}

export const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * `src` with `onEnd` called exactly once when it ends, fails or is returned early, also when it
 * is returned before its first read (which a generator's `finally` would miss). Keeps `poll()`.
 */
export function withEnd<T>(src: AsyncIterable<T>, onEnd: () => void): AsyncIterable<T> {
  return new WithEnd(src, onEnd);
}

/**
 * withEnd's iterable, which is its own iterator (a class: the object literals it replaced, one with
 * a computed `[Symbol.asyncIterator]` key, cost a runtime call and five closures per stream).
 */
class WithEnd<T> implements AsyncIterableIterator<T>, Pollable<T>, PlainAware {
  private readonly it: AsyncIterator<T>;
  private done = false;

  constructor(
    src: AsyncIterable<T>,
    private readonly onEnd: () => void,
  ) {
    this.it = src[Symbol.asyncIterator]();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.onEnd();
  }

  acceptPlain(): void {
    acceptPlain(this.it);
  }

  poll(): IteratorResult<T> | undefined {
    const p = pollable(this.it);
    if (!p) return undefined;
    try {
      const r = p.poll();
      if (r?.done) this.finish();
      return r;
    } catch (err) {
      this.finish();
      throw err;
    }
  }

  async next(): Promise<IteratorResult<T>> {
    try {
      const r = await this.it.next();
      if (r.done) this.finish();
      return r;
    } catch (err) {
      this.finish();
      throw err;
    }
  }

  async return(v?: unknown): Promise<IteratorResult<T>> {
    this.finish();
    return (await this.it.return?.(v)) ?? DONE;
  }
}
