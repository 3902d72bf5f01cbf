import { GatewayError } from '../../errors/gateway-error.ts';
import type { GenerationDeps } from '../deps.ts';
import { sendJson } from '../direct.ts';
import type { ApiHandler } from '../route-table.ts';

/** Liveness: the process serves HTTP. */
export function healthHandler(deps: GenerationDeps): ApiHandler {
  return async (x) => sendJson(x, 200, { status: 'ok' }, deps.config.server.send_timeout_ms);
}

/** Readiness: 503 while starting, while a local model loads, and once draining for shutdown. */
export function readyHandler(deps: GenerationDeps): ApiHandler {
  return async (x) => {
    if (deps.lifecycle.draining) throw new GatewayError('draining', undefined, { retryAfter: 5 });
    const backends: Record<string, string> = {};
    const loading: string[] = [];
    for (const [name, e] of deps.registry.all()) {
      backends[name] = e.unconfigured ? 'unconfigured' : e.status;
      if (e.status === 'loading') loading.push(name);
    }
    if (!deps.lifecycle.ready) {
      const what = loading.length > 0 ? `loading ${loading.map((n) => `"${n}"`).join(', ')}` : 'starting';
      throw new GatewayError('not_ready', `The gateway is not ready yet (${what}).`, { retryAfter: 1 });
    }
    // Shared state: a Redis outage with on_unavailable: open keeps this replica ready (it serves with
    // local limits; a blip must not pull a whole fleet out of the load balancer); with closed, the
    // replica refuses keys with limits, so it reports 503 and the body says why.
    const st = deps.config.state.store === 'redis' ? deps.store?.status() : undefined;
    const state = st ? { store: st.store, state: st.state, ...(st.detail ? { detail: st.detail } : {}) } : undefined;
    if (st?.state === 'degraded' && deps.config.state.store === 'redis' && deps.config.state.on_unavailable === 'closed') {
      throw new GatewayError('state_unavailable', `The gateway cannot reach its state store: ${st.detail ?? 'unavailable'}.`, { retryAfter: 5 });
    }
    sendJson(x, 200, { status: 'ready', backends, ...(state ? { state } : {}) }, deps.config.server.send_timeout_ms);
  };
}
