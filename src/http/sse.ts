/**
 * The only writer of "data: " lines. Writes an async iterable of chunks to the client as Server-Sent
 * Events, straight to Node's ServerResponse, pulling the next chunk only once the last one was
 * accepted (so a slow client slows the upstream read instead of growing a buffer). Chunks that are
 * ready together (read from one upstream read) leave in one write: the socket is corked while
 * they are written and uncorked on the next tick, which adds no wait; only the first two chunks
 * are written at once, so the first token does not wait for the rest of its batch. A failure after the commit
 * point becomes a final `data: {"error":…}` event — which the OpenAI SDKs raise as an APIError —
 * and the stream ends without `[DONE]`, so the loss is visible. A client that goes away stops the
 * pull and returns the iterator; the upstream request is aborted through the request's signal.
 */
import type { ServerResponse } from 'node:http';
import { clientClosed } from '../backends/upstream-errors.ts';
import { asGatewayError, toOpenAIError, type GatewayError } from '../errors.ts';
import { jsonText } from '../protocol/event-text.ts';
import { abandonIfStuck } from './direct.ts';

const DONE = 'data: [DONE]\n\n';

export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
};

export function sseEvent(data: unknown): string {
  return `data: ${jsonText(data)}\n\n`;
}

/**
 * Sends the head (200, SSE_HEADERS plus `headers`) and then every chunk of `src`. `onEnd` is called
 * exactly once: with null after [DONE], or with the error that ended the stream (a client that went
 * away, or took nothing for `sendTimeoutMs` and was disconnected: 499 client_closed).
 * `onFirstChunk` when the first chunk was handed to the socket.
 */
export function writeSse<T>(
  res: ServerResponse,
  headers: Record<string, string>,
  src: AsyncIterable<T>,
  sendTimeoutMs: number,
  onEnd: (err: GatewayError | null) => void,
  onFirstChunk?: () => void,
): void {
  res.writeHead(200, { ...headers, ...SSE_HEADERS });
  const it = src[Symbol.asyncIterator]();
  let ended = false;
  const end = (err: GatewayError | null): void => {
    if (ended) return;
    ended = true;
    onEnd(err);
  };
  let gone = false;
  const onClose = (): void => {
    if (res.writableFinished) return;
    gone = true;
    end(clientClosed());
    void it.return?.(undefined)?.catch(() => {});
  };
  res.once('close', onClose);
  let corked = false;
  const uncork = (): void => {
    corked = false;
    res.uncork();
  };
  // The first two chunks (in OpenAI's shape: the role, then the first token) leave at once; the
  // rest of what arrived with them is batched.
  let eager = 2;
  const write = (s: string): boolean => {
    if (eager > 0) {
      eager--;
      return res.write(s);
    }
    if (!corked) {
      corked = true;
      res.cork();
      process.nextTick(uncork);
    }
    return res.write(s);
  };
  void (async () => {
    let first = onFirstChunk;
    try {
      for (;;) {
        const r = await it.next();
        if (gone) return;
        if (r.done) {
          res.end(DONE);
          end(null);
          return;
        }
        const ok = write(sseEvent(r.value));
        if (first) {
          first();
          first = undefined;
        }
        // a client that takes nothing more for sendTimeoutMs is disconnected (then `gone`)
        if (!ok) await abandonIfStuck(res, 'drain', sendTimeoutMs);
        if (gone) return;
      }
    } catch (err) {
      if (gone) return;
      const e = asGatewayError(err);
      if (e.status !== 499) write(sseEvent(toOpenAIError(e)));
      res.end();
      end(e);
    }
  })();
}
