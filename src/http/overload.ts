/**
 * Process-wide admission: at most `server.max_concurrent_requests` API requests at once; the next
 * one gets 503 + retry-after immediately rather than queueing without bound (memory stays bounded
 * and a load balancer can send it elsewhere). Streams count until their last byte.
 */
import type { Context } from 'hono';
import { GatewayError } from '../errors.ts';
import { nodeResponse } from './direct.ts';
import type { AppEnv } from './types.ts';

/**
 * Admits a request or throws 503 `server_overloaded`. A request admitted on a Node server is
 * released when its response closes (streams count until their last byte); otherwise (tests that
 * call `app.request`) the returned function releases it once the handler is done. Synchronous, so
 * the gate costs no middleware layer of its own (app.ts runs it inside the `/v1/*` middleware).
 */
export type Admit = (c: Context<AppEnv>) => (() => void) | undefined;

export function overloadGate(max: number): Admit | undefined {
  if (max <= 0) return undefined;
  let active = 0;
  return (c) => {
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
    if (!outgoing) return release;
    outgoing.once('close', release);
    return undefined;
  };
}
