/**
 * Stream transforms the pipeline puts around an upstream stream: usage shaping (the client sees the
 * usage chunk only when it asked; the gateway always records it), an end hook that fires exactly
 * once however the stream stops, and replay of cached chunks.
 */
import type { Chunk, Usage } from './pipeline.ts';
import { droppedUsageNull } from './protocol/event-text.ts';

/** Drops the usage chunk (and `usage: null` fields) the client did not ask for; records usage. */
export async function* shapeUsage<T extends Chunk>(src: AsyncIterable<T>, clientWantsUsage: boolean, sink: { value: Usage | undefined }): AsyncGenerator<T> {
  for await (const chunk of src) {
    if (chunk.usage) sink.value = chunk.usage;
    if (clientWantsUsage) {
      yield chunk;
      continue;
    }
    if (chunk.usage && chunk.choices.length === 0) continue;
    if ('usage' in chunk) {
      delete chunk.usage;
      droppedUsageNull(chunk);
    }
    yield chunk;
  }
}

/** Calls `onEnd` once when the stream ends, fails, is returned early, or the client goes away. */
export function ended<T>(src: AsyncIterable<T>, signal: AbortSignal, onEnd: () => void): AsyncIterable<T> {
  let done = false;
  const finish = (): void => {
    if (done) return;
    done = true;
    signal.removeEventListener('abort', finish);
    onEnd();
  };
  signal.addEventListener('abort', finish, { once: true });
  return {
    [Symbol.asyncIterator]: () => {
      const it = src[Symbol.asyncIterator]();
      return {
        async next() {
          try {
            const r = await it.next();
            if (r.done) finish();
            return r;
          } catch (err) {
            finish();
            throw err;
          }
        },
        async return(v?: unknown) {
          finish();
          return (await it.return?.(v)) ?? { done: true, value: undefined };
        },
      };
    },
  };
}

export async function* replay<T>(chunks: readonly unknown[]): AsyncGenerator<T> {
  for (const c of chunks) yield c as T;
}

