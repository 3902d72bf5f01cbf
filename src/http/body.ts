/**
 * Reads a JSON request body with a hard size limit. The limit is checked against
 * `content-length` before reading and against the bytes actually received while reading, so a
 * client that lies about the length or streams without one cannot make the gateway buffer more.
 * A body the answer does not wait for is dropped as it comes (settleUnreadBody).
 */
import type { IncomingMessage } from 'node:http';
import { invalidRequest, payloadTooLarge } from '../errors/gateway-error.ts';
import type { Exchange } from './exchange.ts';

/**
 * The whole body, when it is already in the stream's buffer (the usual case for a small JSON body
 * sent with its head): the parser has seen its end, or as many bytes as `content-length` declares
 * are buffered. It is taken now instead of through listeners, two ticks and a promise. Undefined
 * when some of it is still to come.
 */
function bodyAlreadyHere(incoming: IncomingMessage, limit: number, length: number | undefined): Buffer | undefined {
  if (incoming.readableFlowing !== null || incoming.destroyed) return undefined;
  if (!incoming.complete && (length === undefined || incoming.readableLength !== length)) return undefined;
  if (incoming.readableLength > limit) throw payloadTooLarge(limit);
  // everything buffered, in one buffer in paused mode
  const parts: Buffer[] = [];
  let size = 0;
  for (let b = incoming.read() as Buffer | null; b !== null; b = incoming.read() as Buffer | null) {
    parts.push(b);
    size += b.length;
  }
  // flowing from now on, so the end the parser pushes (already, or in a moment) is emitted
  incoming.resume();
  return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, size);
}

function readIncoming(incoming: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = (): void => {
      incoming.off('data', onData);
      incoming.off('end', onEnd);
      incoming.off('error', onError);
      incoming.off('aborted', onAborted);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        incoming.pause();
        reject(payloadTooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(invalidRequest(`The request body could not be read: ${err.message}`));
    };
    const onAborted = (): void => {
      cleanup();
      reject(invalidRequest('The client aborted while sending the request body.'));
    };
    incoming.on('data', onData);
    incoming.on('end', onEnd);
    incoming.on('error', onError);
    incoming.on('aborted', onAborted);
  });
}

/** Fatal: invalid bytes are a 400, not silently replaced by U+FFFD in the prompt. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

export async function readJsonBody(x: Exchange, limit: number): Promise<unknown> {
  const declared = x.header('content-length');
  const length = declared === undefined ? undefined : Number(declared);
  if (length !== undefined && length > limit) {
    x.closeAfter = true;
    throw payloadTooLarge(limit);
  }
  let buf: Buffer;
  const { incoming } = x;
  // only this function reads a body; were it read already, waiting for its end would hang
  if (incoming.readableEnded) throw new Error('the request body was read before readJsonBody');
  try {
    let here = bodyAlreadyHere(incoming, limit, length);
    if (!here) {
      // The handler runs inside the parser's callback for the head, before the parser has gone
      // on to the body bytes of the same packet; a microtask later they are in the buffer.
      await undefined;
      here = bodyAlreadyHere(incoming, limit, length);
    }
    buf = here ?? (await readIncoming(incoming, limit));
  } catch (err) {
    x.closeAfter = true;
    throw err;
  }
  x.bodyBytes = buf.length;
  if (buf.length === 0) throw invalidRequest('The request body is empty; expected a JSON object.');
  let text: string;
  try {
    text = UTF8.decode(buf);
  } catch {
    throw invalidRequest('The request body is not valid UTF-8. Send a JSON object encoded as UTF-8.');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const detail = err instanceof SyntaxError ? err.message.slice(0, 200) : 'invalid JSON';
    throw invalidRequest(`We could not parse the JSON body of your request (${detail}). Send a valid JSON object with 'Content-Type: application/json'.`);
  }
  // each level takes two bytes at least (`[` and `]`): a shorter body cannot be too deep
  if (buf.length > 2 * MAX_JSON_DEPTH && deeperThan(value, MAX_JSON_DEPTH)) {
    throw invalidRequest(`The JSON body of your request is nested deeper than ${MAX_JSON_DEPTH} levels.`);
  }
  return value;
}

/**
 * JSON.parse takes any depth, but serialising the body again (for an upstream, a cache key) is
 * recursive and overflows the stack a few thousand levels down, so deeper bodies are refused here.
 */
export const MAX_JSON_DEPTH = 256;

/** Iterative, so the check itself cannot overflow; visits containers only. */
function deeperThan(root: unknown, max: number): boolean {
  const values: unknown[] = [root];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop();
    const d = depths.pop() ?? 0;
    if (typeof v !== 'object' || v === null) continue;
    if (d > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === 'object' && child !== null) {
        values.push(child);
        depths.push(d + 1);
      }
    }
  }
  return false;
}

/** How long each phase of dropping an unread body lasts, and how much of it is dropped in all. */
const LINGER_MS = 2000;
const LINGER_BYTES = 64 * 1024 * 1024;
/** The rest of a body declared at most this long is dropped as it comes and its connection kept. */
const KEEP_ALIVE_REST_BYTES = 64 * 1024;

/**
 * The fate of a request body the answer does not wait for (a 401, a 503, a 404 or 405, a 413 for a
 * body over the limit, an answer to a GET that came with a body), on both ways in. Call it once
 * the answer is decided, before its head is written: it sets `x.closeAfter` when the answer must
 * say `connection: close`.
 *
 * The client may still be sending. A socket closed with unread bytes makes the kernel reset the
 * connection, and a client still writing then gets EPIPE / ECONNRESET instead of the answer; so
 * the rest is read and dropped, never buffered (RFC 9112 §9.6):
 * - the rest of a body declared at most KEEP_ALIVE_REST_BYTES long is dropped as it comes and the
 *   connection carries the next request; if it is still coming after LINGER_MS, the connection is
 *   closed as below;
 * - any other body (larger, of unknown length, or refused part-way) closes the connection: once
 *   the answer is out, only the gateway's sending side is closed (FIN), and what the client still
 *   sends is dropped until its body or its side ends;
 * - a closing connection is destroyed after LINGER_MS, or past LINGER_BYTES, whatever still comes
 *   (a slow or endless body holds a socket no longer than that).
 */
export function settleUnreadBody(x: Exchange): void {
  if (x.bodySettled) return;
  x.bodySettled = true;
  const { incoming } = x;
  const socket = incoming.socket;
  // complete: the parser has read all of it (the rest of it in the stream goes with the request)
  if (incoming.complete || incoming.destroyed || socket === null || socket.destroyed) return;
  const declared = incoming.headers['transfer-encoding'] === undefined ? Number(incoming.headers['content-length'] ?? 0) : NaN;
  if (!(declared <= KEEP_ALIVE_REST_BYTES)) x.closeAfter = true;

  let bytes = 0;
  /** the body has been read to its end */
  let ended = false;
  /** the gateway's sending side is closed: the connection is on its way out */
  let closing = false;
  let timer = setTimeout(onTimeout, LINGER_MS);
  timer.unref();

  function stopReading(): void {
    incoming.off('data', onData);
    incoming.off('end', onEnd);
    incoming.off('error', onGone);
    incoming.off('close', onGone);
  }
  function destroy(): void {
    clearTimeout(timer);
    stopReading();
    socket?.destroy();
  }
  /** FIN after the answer; the socket is destroyed once that is sent if the body has ended, else on its end or a bound. */
  function halfClose(): void {
    if (closing || socket === null) return;
    closing = true;
    socket.end();
    if (ended) finish();
  }
  /** Nothing more to read: the socket goes once all the gateway wrote is sent (the timer still bounds that). */
  function finish(): void {
    stopReading();
    if (socket === null || socket.writableFinished) destroy();
    else socket.once('finish', destroy);
  }
  function onData(chunk: Buffer): void {
    bytes += chunk.length;
    if (bytes > LINGER_BYTES) destroy();
  }
  function onEnd(): void {
    ended = true;
    stopReading();
    if (closing) finish();
    // the whole body came in time: the connection carries the next request
    else if (!x.closeAfter) clearTimeout(timer);
  }
  function onGone(): void {
    if (!ended) destroy();
  }
  function onTimeout(): void {
    // a kept connection whose answer is out gets a second period, half-closed
    if (!x.closeAfter && !closing && x.outgoing.writableFinished) {
      x.closeAfter = true;
      timer = setTimeout(destroy, LINGER_MS);
      timer.unref();
      halfClose();
      return;
    }
    destroy();
  }

  // Node calls destroySoon() on the socket once an answer with `connection: close` is handed to
  // it; its own ends the socket and destroys it once that is sent, whatever is still coming in.
  if (x.closeAfter) socket.destroySoon = halfClose;
  incoming.on('data', onData);
  incoming.once('end', onEnd);
  incoming.once('error', onGone);
  incoming.once('close', onGone);
  incoming.resume();
}
