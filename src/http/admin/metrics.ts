import type { Context } from 'hono';
import type { GenerationDeps } from '../deps.ts';
import type { AppEnv } from '../types.ts';

/** GET /metrics: Prometheus text exposition of the gateway's own registry. */
export function metricsHandler(deps: GenerationDeps) {
  return async (c: Context<AppEnv>): Promise<Response> => {
    const { contentType, body } = await deps.metrics.render();
    c.header('content-type', contentType);
    c.header('cache-control', 'no-store');
    return c.body(body, 200);
  };
}
