/**
 * Process-wide admission: at most `server.max_concurrent_requests` API requests at once; the next
 * one gets 503 + retry-after immediately rather than queueing without bound (memory stays bounded
 * and a load balancer can send it elsewhere). Streams count until their last byte.
 */
import { GatewayError } from '../errors/gateway-error.ts';
import type { Exchange } from './exchange.ts';

/**
 * Admits a request or throws 503 `server_overloaded`. An admitted request is released when its
 * response closes (streams count until their last byte). Synchronous, so the gate costs no
 * middleware layer of its own (it runs in the API's guard, api.ts).
 */
export type Admit = (x: Exchange) => void;

export function overloadGate(max: number): Admit | undefined {
  if (max <= 0) return undefined;
  let active = 0;
  const release = (): void => {
    active--;
  };
  return (x) => {
    if (active >= max) {
      throw new GatewayError('server_overloaded', `The gateway is at its limit of ${max} concurrent requests; retry shortly.`, { retryAfter: 1 });
    }
    active++;
    x.outgoing.once('close', release);
  };
}
