/**
 * The only writer of "data: " lines. Writes a stream of parts (protocol/stream-part.ts) to the
 * client as Server-Sent Events, straight to Node's ServerResponse, pulling no more parts while
 * Node's buffer for the client is full (so a slow client slows the upstream read instead of
 * growing a buffer). A part's text comes from the part (`sseText`): a chunk's own upstream text
 * while unchanged. Parts are joined into one write per event-loop turn, which adds no wait; the
 * part marked `flush` (the router's commit point) is written with what is held before it, and
 * sent at once unless other requests are in flight (see sendFirst). A failure after the commit point becomes a final `data: {"error":…}`
 * event — which the OpenAI SDKs raise as an APIError — and the stream ends without `[DONE]`, so the
 * loss is visible. A client that goes away stops the
 * pull and returns the iterator; the upstream request is aborted through the request's signal.
 */
import type { ServerResponse } from 'node:http';
import { clientClosed } from '../errors/upstream.ts';
import { asGatewayError, toOpenAIError, type GatewayError } from '../errors/gateway-error.ts';
import { pollable } from '../lib/pollable.ts';
import { sseText, type StreamPart } from '../protocol/stream-part.ts';
import { performance } from 'node:perf_hooks';
import { WriteBatch } from '../lib/write-batch.ts';
import { abandonIfStuck } from './direct.ts';

const DONE = 'data: [DONE]\n\n';

/** The head of every event stream the gateway writes. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
};

/** The error event that ends a failed stream. */
function errorEvent(e: GatewayError): string {
  return `data: ${JSON.stringify(toOpenAIError(e))}\n\n`;
}

/** How a protocol ends its event stream: cleanly, after a failure, and what keeps it alive. */
export interface SseFraming {
  /** written after the last part of a clean end */
  done: string;
  /** the event that ends a failed stream, given the number of parts written before it */
  error(e: GatewayError, written: number): string;
  /** written when nothing else was for `every` ms (a keep-alive) */
  ping?: { text: string; every: number } | undefined;
}

/** Chat Completions (and legacy completions): `data: [DONE]`, an OpenAI error object as the last event. */
export const OPENAI_FRAMING: SseFraming = { done: DONE, error: errorEvent };

/**
 * Sends the head (200, `headers` with SSE_HEADERS added to that object) and then every chunk of `src`. `onEnd` is called
 * exactly once: with null after [DONE], or with the error that ended the stream (a client that went
 * away, or took nothing for `sendTimeoutMs` and was disconnected: 499 client_closed).
 * `onFirstChunk` when the first chunk was handed to the socket. `busy`: whether other requests are
 * in flight (then the first token may wait for the rest of its upstream read, see sendFirst).
 */
export function writeSse(
  res: ServerResponse,
  headers: Record<string, string>,
  src: AsyncIterable<StreamPart>,
  sendTimeoutMs: number,
  onEnd: (err: GatewayError | null) => void,
  onFirstChunk?: () => void,
  busy?: () => boolean,
  framing: SseFraming = OPENAI_FRAMING,
): void {
  // the SSE headers join the answer's own (its per-request object; a copy cost more than the rest of the head)
  for (const k in SSE_HEADERS) headers[k] = SSE_HEADERS[k] as string;
  res.writeHead(200, headers);
  const it = src[Symbol.asyncIterator]();
  const poll = pollable(it);
  let ended = false;
  let written = 0;
  let lastWrite = 0;
  const ping = framing.ping;
  const pinger = ping
    ? setInterval(() => {
        if (!ended && !res.writableNeedDrain && performance.now() - lastWrite >= ping.every) res.write(ping.text);
      }, ping.every / 3).unref()
    : undefined;
  const end = (err: GatewayError | null): void => {
    if (ended) return;
    ended = true;
    if (pinger) clearInterval(pinger);
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
  // Chunks are joined and leave in one write at the end of the event-loop turn (one chunked frame
  // and one system call per batch instead of per chunk; a stream read in one go leaves in one
  // write with its end), except that the chunk at the commit point (the first token) sends what
  // is held at once, so the first token never waits for the rest of its batch.
  let first = onFirstChunk;
  const chunkWritten = (): void => {
    first?.();
    first = undefined;
  };
  const send = (text: string): void => {
    if (gone) return;
    res.write(text);
    if (pinger) lastWrite = performance.now();
    chunkWritten();
  };
  /**
   * The commit point's write. Node corks the socket on a chunked write and uncorks it on the next
   * tick, which comes only after this loop has pulled (and parsed) everything else ready in the
   * same upstream read. When this is the only request in flight, the socket is uncorked now: the
   * first token does not wait for the rest of its read. When others are in flight it stays corked
   * until that tick, so what was read with the first token leaves in the same system call — and a
   * stream read whole (a fast upstream, a short answer) in one write with its end instead of two
   * (hot path: one system call per upstream read under load), and the wait (one read's processing)
   * is small against the queueing every request then sees. A first token that arrives alone in its
   * read (a real model's, typically) leaves at once either way.
   */
  const sendFirst = (text: string): void => {
    send(text);
    if (busy?.() !== true) res.socket?.uncork();
  };
  const batch = new WriteBatch(send, setImmediate);
  /** The last write(s) and the end of the response. */
  const finish = (tail: string): void => {
    const held = batch.take();
    if (held !== '') chunkWritten();
    res.end(held + tail);
  };
  void (async () => {
    try {
      for (;;) {
        // Node's buffer is full: pull nothing more until the client takes some of it; a client
        // that takes nothing for sendTimeoutMs is disconnected (then `gone`)
        if (res.writableNeedDrain) await abandonIfStuck(res, 'drain', sendTimeoutMs);
        if (gone) return;
        // a chunk that is ready now is taken without a promise (lib/pollable.ts)
        let r = poll?.poll();
        if (r === undefined) {
          r = await it.next();
          if (gone) return;
        }
        if (r.done) {
          finish(framing.done);
          end(null);
          return;
        }
        written++;
        if (r.value.flush) sendFirst(batch.take() + sseText(r.value));
        else batch.push(sseText(r.value));
      }
    } catch (err) {
      if (gone) return;
      const e = asGatewayError(err);
      finish(e.status !== 499 ? framing.error(e, written) : '');
      end(e);
    }
  })();
}
