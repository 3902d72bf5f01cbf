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

export const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * `src` with `onEnd` called exactly once when it ends, fails or is returned early, also when it
 * is returned before its first read (which a generator's `finally` would miss). Keeps `poll()`.
 */
export function withEnd<T>(src: AsyncIterable<T>, onEnd: () => void): AsyncIterable<T> {
  return new WithEnd(src, onEnd);
}

/**
 * withEnd's iterable, which is its own iterator (hot path: a class, no closure per stream and no
 * computed `[Symbol.asyncIterator]` key).
 */
class WithEnd<T> implements AsyncIterableIterator<T>, Pollable<T> {
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

/** `src` with `f` applied to each value as it is handed on. Keeps `poll()`. */
export function mapped<T>(src: AsyncIterable<T>, f: (value: T) => T): AsyncIterableIterator<T> {
  return new Mapped(src[Symbol.asyncIterator](), f);
}

class Mapped<T> implements AsyncIterableIterator<T>, Pollable<T> {
  constructor(
    private readonly it: AsyncIterator<T>,
    private readonly f: (value: T) => T,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<T> | undefined {
    const r = pollable(this.it)?.poll();
    return r === undefined || r.done === true ? r : { done: false, value: this.f(r.value) };
  }

  async next(): Promise<IteratorResult<T>> {
    const r = await this.it.next();
    return r.done === true ? r : { done: false, value: this.f(r.value) };
  }

  async return(v?: unknown): Promise<IteratorResult<T>> {
    return (await this.it.return?.(v)) ?? DONE;
  }
}
