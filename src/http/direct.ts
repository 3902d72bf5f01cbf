/**
 * Answers of the hot routes (chat, completions, embeddings), written straight to Node's
 * ServerResponse with a plain header object, instead of a web Response that @hono/node-server
 * converts back (a Headers object per response, a ReadableStream read chunk by chunk for SSE):
 * that conversion was about a sixth of the gateway's CPU per request in the profiles
 * (docs/performance.md). Hono still routes, runs the middleware and writes every other answer,
 * errors included; a route that wrote its answer here hands Hono `alreadySent()` so that
 * @hono/node-server leaves the response alone.
 *
 * Headers a route learns while it works (who served it, cost, limits) collect in
 * `c.get('out')`; the answer carries them with `x-request-id`.
 */
import type { ServerResponse } from 'node:http';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Context } from 'hono';
import type { AppEnv } from './types.ts';

/** The header by which @hono/node-server recognises "the route wrote the response itself". */
const SENT = [...RESPONSE_ALREADY_SENT.headers.keys()][0] ?? 'x-hono-already-sent';

/**
 * A fresh "already sent" marker. Reading `.body` turns @hono/node-server's lightweight Response
 * into its native one, the kind it checks for the marker header; this survives Hono copying the
 * response when a middleware sets a header afterwards (a shared marker would not: Hono's copy of
 * it becomes a lightweight Response again, and node-server would write a second head).
 */
export function alreadySent(): Response {
  const r = new Response(null, { headers: { [SENT]: 'true' } });
  void r.body;
  return r;
}

/** The Node response to write to, when running on @hono/node-server (tests may call app.request). */
export function nodeResponse(c: Context<AppEnv>): ServerResponse | undefined {
  return (c.env as AppEnv['Bindings'] | undefined)?.outgoing as ServerResponse | undefined;
}

/** The headers collected for this request's answer, with its request id. */
export function answerHeaders(c: Context<AppEnv>): Record<string, string> {
  const out = c.get('out');
  out['x-request-id'] = c.get('requestId');
  return out;
}

/**
 * A complete answer: status, the collected headers plus `content-type`, and the body. A client that
 * has not taken all of it after `sendTimeoutMs` is disconnected.
 */
export function sendBody(c: Context<AppEnv>, status: number, contentType: string, body: string | Uint8Array<ArrayBuffer>, sendTimeoutMs: number): Response {
  const headers = answerHeaders(c);
  headers['content-type'] = contentType;
  const res = nodeResponse(c);
  if (!res) return c.body(body, status as 200, headers);
  headers['content-length'] = String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength);
  res.writeHead(status, headers);
  res.end(body);
  if (!res.writableFinished) abandonIfStuck(res, 'finish', sendTimeoutMs);
  return alreadySent();
}

export function sendJson(c: Context<AppEnv>, status: number, body: unknown, sendTimeoutMs: number): Response {
  return sendBody(c, status, 'application/json', JSON.stringify(body), sendTimeoutMs);
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
