/**
 * Reads a JSON request body with a hard size limit. The limit is checked against
 * `content-length` before reading and against the bytes actually received while reading, so a
 * client that lies about the length or streams without one cannot make the gateway buffer more.
 */
import type { IncomingMessage } from 'node:http';
import { invalidRequest, payloadTooLarge } from '../errors.ts';
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

/** How long, and how much of, a body nobody read is taken and dropped before its connection is closed. */
const DISCARD_MS = 500;
const DISCARD_BYTES = 64 * 1024 * 1024;

/**
 * Reads and drops the rest of a request body nobody read (its answer came first, a 401 say), so
 * the connection can carry the client's next request; a body still coming after DISCARD_MS, or
 * larger than DISCARD_BYTES, closes the connection instead (left to Node, it would be read to its
 * end however large). Call it before the answer ends.
 */
export function discardBody(incoming: IncomingMessage): void {
  if (incoming.readableEnded || incoming.destroyed || incoming.readableFlowing === true) return;
  let bytes = 0;
  const stop = (): void => {
    clearTimeout(timer);
    incoming.off('data', onData);
    incoming.off('end', stop);
    incoming.off('error', stop);
  };
  const close = (): void => {
    stop();
    incoming.socket?.destroySoon();
  };
  const onData = (chunk: Buffer): void => {
    bytes += chunk.length;
    if (bytes > DISCARD_BYTES) close();
  };
  const timer = setTimeout(close, DISCARD_MS);
  timer.unref();
  incoming.on('data', onData);
  incoming.once('end', stop);
  incoming.once('error', stop);
}
