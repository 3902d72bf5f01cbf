/**
 * Process-wide admission: at most `server.max_concurrent_requests` API requests at once; the next
 * one gets 503 + retry-after immediately rather than queueing without bound (memory stays bounded
 * and a load balancer can send it elsewhere). Streams count until their last byte.
 */
import type { MiddlewareHandler } from 'hono';
import { GatewayError } from '../errors.ts';
import { nodeResponse } from './direct.ts';
import type { AppEnv } from './types.ts';

export function overloadGuard(max: number): MiddlewareHandler<AppEnv> {
  if (max <= 0) return async (_c, next) => next();
  let active = 0;
  return async (c, next) => {
    if (active >= max) {
      throw new GatewayError(`The gateway is at its limit of ${max} concurrent requests; retry shortly.`, {
        status: 503,
        type: 'service_unavailable_error',
        code: 'server_overloaded',
        retryAfter: 1,
      });
    }
    active++;
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      active--;
    };
    const outgoing = nodeResponse(c);
    if (outgoing) outgoing.once('close', release);
    try {
      await next();
    } finally {
      if (!outgoing) release();
    }
  };
}
