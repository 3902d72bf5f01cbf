import type { GenerationDeps } from '../deps.ts';
import { sendBody } from '../direct.ts';
import type { ApiHandler } from '../route-table.ts';

/** GET /metrics: Prometheus text exposition of the gateway's own registry. */
export function metricsHandler(deps: GenerationDeps): ApiHandler {
  return async (x) => {
    const { contentType, body } = await deps.metrics.render();
    x.out['cache-control'] = 'no-store';
    sendBody(x, 200, contentType, body, deps.config.server.send_timeout_ms);
  };
}
