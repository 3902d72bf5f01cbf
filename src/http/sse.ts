/**
 * The only writer of "data: " lines. Turns an async iterable of chunks into a Server-Sent Events
 * body, pulled one chunk at a time (so a slow client slows the upstream read instead of growing a
 * buffer). A failure after the commit point becomes a final `data: {"error":…}` event — which the
 * OpenAI SDKs raise as an APIError — and the stream ends without `[DONE]`, so the loss is visible.
 * A client that goes away cancels the iterator, which aborts the upstream request.
 */
import { clientClosed } from '../backends/upstream-errors.ts';
import { asGatewayError, toOpenAIError, type GatewayError } from '../errors.ts';

const enc = new TextEncoder();
const DONE = enc.encode('data: [DONE]\n\n');

export const SSE_HEADERS: Record<string, string> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
};

export function sseEvent(data: unknown): Uint8Array {
  return enc.encode(`data: ${JSON.stringify(data)}\n\n`);
}

/** `onEnd` is called exactly once: with null after [DONE], or with the error that ended the stream. */
export function sseBody<T>(
  src: AsyncIterable<T>,
  onEnd: (err: GatewayError | null) => void,
  onFirstChunk?: () => void,
): ReadableStream<Uint8Array> {
  let first = onFirstChunk;
  let it: AsyncIterator<T> | undefined;
  let ended = false;
  const end = (err: GatewayError | null): void => {
    if (ended) return;
    ended = true;
    onEnd(err);
  };
  return new ReadableStream<Uint8Array>(
    {
      start() {
        it = src[Symbol.asyncIterator]();
      },
      async pull(controller) {
        if (!it) return;
        try {
          const r = await it.next();
          if (r.done) {
            controller.enqueue(DONE);
            controller.close();
            end(null);
            return;
          }
          controller.enqueue(sseEvent(r.value));
          if (first) {
            first();
            first = undefined;
          }
        } catch (err) {
          const e = asGatewayError(err);
          if (e.status !== 499) {
            try {
              controller.enqueue(sseEvent(toOpenAIError(e)));
            } catch {
              // the client is already gone
            }
          }
          try {
            controller.close();
          } catch {
            // already closed or cancelled
          }
          end(e);
        }
      },
      async cancel() {
        end(clientClosed());
        await it?.return?.(undefined);
      },
    },
    { highWaterMark: 1 },
  );
}
