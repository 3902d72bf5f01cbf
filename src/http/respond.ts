import type { Context } from 'hono';
import type { Routed } from '../router/router.ts';
import type { AppEnv } from './types.ts';

/** JSON response with the headers already set on the context. */
export function json(c: Context<AppEnv>, status: number, body: unknown): Response {
  c.header('content-type', 'application/json');
  return c.body(JSON.stringify(body), status as 200);
}

/** Who served the request, on the response and in the request log. */
export function markRouted<T>(c: Context<AppEnv>, r: Routed<T>): void {
  c.header('x-switchyard-backend', r.target.backend);
  c.header('x-switchyard-model', r.target.model);
  c.header('x-switchyard-attempts', String(r.attempts));
  const log = c.get('log');
  log.backend = r.target.backend;
  log.upstreamModel = r.target.model;
  log.attempts = r.attempts;
}

export function requestInfo(c: Context<AppEnv>): { requestId: string; signal: AbortSignal } {
  return { requestId: c.get('requestId'), signal: c.req.raw.signal };
}
