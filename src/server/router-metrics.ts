import type { RouterObserver } from '../router/router.ts';
import type { LabelBounds, Metrics } from '../telemetry/metrics.ts';

/**
 * The router's events as metrics. Hot path: a stream's attempt ends at its commit point, between
 * the upstream's first token and the client's write of it, so recording is two cell updates
 * (telemetry/cells.ts) and nothing else.
 */
export function routerMetrics(m: Metrics, labels: LabelBounds): RouterObserver {
  return {
    attempt(backend, outcome, ms) {
      const b = labels.backend(backend);
      m.attempts.inc({ backend: b, outcome });
      m.upstreamDuration.observe({ backend: b }, ms / 1000);
    },
    retry(model, backend) {
      m.retries.inc({ model: labels.model(model), backend: labels.backend(backend) });
    },
    failover(model, fromBackend) {
      m.failovers.inc({ model: labels.model(model), from_backend: labels.backend(fromBackend) });
    },
  };
}
