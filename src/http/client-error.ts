/**
 * The answer to what Node's HTTP parser refuses before a request exists (garbage, headers over
 * its limit, a client too slow to send its head or body): the OpenAI error envelope from the
 * error table, written straight to the socket, and the connection closed.
 */
import type { Duplex } from 'node:stream';
import { STATUS_CODES } from 'node:http';
import { GatewayError, toOpenAIError } from '../errors/gateway-error.ts';

/** The table error for a parser failure (Node's `clientError`). */
export function parserError(err: NodeJS.ErrnoException): GatewayError {
  if (err.code === 'HPE_HEADER_OVERFLOW') return new GatewayError('headers_too_large');
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return new GatewayError('request_timeout');
  return new GatewayError('bad_request');
}

/** A `clientError` listener: the envelope when the socket can still take it, else nothing. */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable || (err.code === 'ECONNRESET' && socket.destroyed)) {
    socket.destroy();
    return;
  }
  const e = parserError(err);
  const body = JSON.stringify(toOpenAIError(e));
  socket.end(
    `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? ''}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
