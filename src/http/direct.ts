/**
 * Answers of every route (chat, completions, embeddings, models, the admin routes, …), written
 * straight to Node's ServerResponse with a plain header object: no web Response, Headers object or
 * ReadableStream per answer on the hot path (docs/architecture.md, "Hot-path deviations").
 *
 * Headers a route learns while it works (who served it, cost, limits) collect in the exchange's
 * `out`; the answer carries them with `x-request-id`. */
import type { ServerResponse } from 'node:http';
import type { Exchange } from './exchange.ts';

/** The headers collected for this request's answer, with its request id. */
export function answerHeaders(x: Exchange): Record<string, string> {
  const out = x.out;
  out['x-request-id'] = x.requestId;
  return out;
}

/**
 * A complete answer: status, the collected headers plus `content-type`, and the body. A client that
 * has not taken all of it after `sendTimeoutMs` (plus a second per 64 KiB) is disconnected.
 */
export function sendBody(
  x: Exchange,
  status: number,
  contentType: string,
  body: string | Uint8Array<ArrayBuffer>,
  sendTimeoutMs: number,
  /** called once all of `body` was handed to the OS (never, if the connection is lost first) */
  onSent?: () => void,
): void {
  const headers = answerHeaders(x);
  headers['content-type'] = contentType;
  const res = x.outgoing;
  const length = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
  headers['content-length'] = String(length);
  res.writeHead(status, headers);
  if (onSent) res.once('finish', onSent);
  res.end(body);
  // Node cannot tell how much of one large write the client took so far: allow the timeout plus a
  // second per 64 KiB (a client slower than that on a big answer is cut too). An answer the kernel
  // took whole already (writableLength 0: the usual case for a small one) needs no watch.
  if (!res.writableFinished && res.writableLength > 0) void abandonIfStuck(res, 'finish', sendTimeoutMs + Math.ceil(length / 65536) * 1000);
}

export function sendJson(x: Exchange, status: number, body: unknown, sendTimeoutMs: number): void {
  sendBody(x, status, 'application/json', JSON.stringify(body), sendTimeoutMs);
}

/**
 * Destroys `res` (closing its connection) unless `event` ('finish': all of it handed to the OS;
 * 'drain': room to write again) comes within `ms`. Resolves true on the event, false when the
 * response was destroyed or had closed.
 */
export function abandonIfStuck(res: ServerResponse, event: 'finish' | 'drain', ms: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      res.off(event, onEvent);
      res.off('close', onClose);
      resolve(ok);
    };
    const onEvent = (): void => done(true);
    const onClose = (): void => done(false);
    const timer = setTimeout(() => {
      done(false);
      res.destroy();
    }, ms);
    timer.unref();
    res.once(event, onEvent);
    res.once('close', onClose);
  });
}
