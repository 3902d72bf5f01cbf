/**
 * What both ways in share for the API: the generation routes' handlers, the guard every `/v1/*`
 * request passes (overload gate, then the client key), and the OpenAI error envelope of a failed
 * request. The routes' own listener (listener.ts) and Hono (http/app.ts) use exactly these, so a
 * request gets the same answer whichever way it came.
 */
import type { Deps } from './deps.ts';
import { asGatewayError, errorHeaders, toOpenAIError } from '../errors/gateway-error.ts';
import { keyCheck } from './auth.ts';
import { settleUnreadBody } from './body.ts';
import { chatHandler } from './routes/chat.ts';
import { completionsHandler } from './routes/completions.ts';
import { embeddingsHandler } from './routes/embeddings.ts';
import type { Exchange } from './exchange.ts';
import { overloadGate } from './overload.ts';

/** A route that writes its answer itself (direct.ts, sse.ts); it throws what should become an error answer. */
export type ApiHandler = (x: Exchange) => Promise<void>;

export interface Api {
  /** POST routes by exact path */
  readonly post: ReadonlyMap<string, ApiHandler>;
  /** throws 503 server_overloaded or 401; admits the request and records its key otherwise */
  readonly guard: (x: Exchange) => void;
}

export function createApi(deps: Deps): Api {
  const admit = overloadGate(deps.config.server.max_concurrent_requests);
  const authenticate = keyCheck(deps.config.keys);
  return {
    post: new Map([
      ['/v1/chat/completions', chatHandler(deps)],
      ['/v1/completions', completionsHandler(deps)],
      ['/v1/embeddings', embeddingsHandler(deps)],
    ]),
    guard: (x) => {
      admit?.(x);
      authenticate?.(x);
    },
  };
}

export interface ErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The error answer for `err` (logged when it is our own fault), its code recorded in the request's log. */
export function errorAnswer(deps: Deps, x: Exchange, err: unknown): ErrorAnswer {
  const e = asGatewayError(err);
  if (e.status >= 500 && e.code === 'internal_error') {
    const cause = e.cause instanceof Error ? e.cause : undefined;
    deps.logger.error('internal error', {
      request_id: x.requestId,
      error: cause?.name ?? 'unknown',
      detail: cause?.message?.slice(0, 500),
      stack: cause?.stack?.split('\n').slice(0, 6).join(' | '),
    });
  }
  const { log } = x;
  log.errorCode = e.code ?? e.type;
  if (e.attempts !== undefined) log.attempts = e.attempts;
  if (e.backend !== undefined) log.backend ??= e.backend;
  // the body the answer does not wait for: dropped as it comes, or the connection closes after it
  settleUnreadBody(x);
  const headers = errorHeaders(e);
  headers['content-type'] = 'application/json';
  headers['x-request-id'] = x.requestId;
  if (x.closeAfter) headers.connection = 'close';
  // 499 is not a status a client ever sees; it only marks our own log line.
  return { status: e.status === 499 ? 400 : e.status, headers, body: JSON.stringify(toOpenAIError(e)) };
}

/** Writes the error answer straight to Node's response (the routes' own listener). */
export function sendError(deps: Deps, x: Exchange, err: unknown): void {
  const a = errorAnswer(deps, x, err);
  const res = x.outgoing;
  if (res.headersSent) {
    // the answer had begun: all that can still tell the client is the cut
    res.destroy();
    return;
  }
  a.headers['content-length'] = String(Buffer.byteLength(a.body));
  res.writeHead(a.status, a.headers);
  res.end(a.body);
}
