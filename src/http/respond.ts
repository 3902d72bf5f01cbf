import type { Context } from 'hono';
import { invalidRequest } from '../errors.ts';
import type { RequestInfo } from '../gateway.ts';
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

/** Parses a positive millisecond count, or undefined. */
function positiveMs(v: string | undefined, scale = 1): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v) * scale;
  return Number.isFinite(n) && n > 0 ? n : undefined;
}

export function requestInfo(c: Context<AppEnv>): RequestInfo {
  const own = c.req.header('x-switchyard-deadline-ms');
  const deadline = positiveMs(own);
  if (own !== undefined && deadline === undefined) {
    throw invalidRequest(`Header x-switchyard-deadline-ms must be a positive number of milliseconds.`, 'x-switchyard-deadline-ms');
  }
  // The OpenAI SDKs announce their own timeout (seconds): retrying past it helps nobody.
  const sdk = positiveMs(c.req.header('x-stainless-timeout'), 1000);
  const pin = c.req.header('x-switchyard-backend');
  return {
    requestId: c.get('requestId'),
    signal: c.req.raw.signal,
    pinBackend: pin === undefined || pin === '' ? undefined : pin,
    deadlineMs: deadline !== undefined && sdk !== undefined ? Math.min(deadline, sdk) : (deadline ?? sdk),
    keyName: c.get('keyName'),
    bodyBytes: c.get('bodyBytes') ?? 0,
  };
}
