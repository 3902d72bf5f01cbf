/**
 * One /metrics over every worker: each worker hands the primary its registry's figures
 * (`getMetricsAsJSON`), the primary sums them with prom-client's AggregatorRegistry (counters and
 * histograms summed; Node's process metrics by the aggregator each declares) and a worker's
 * GET /metrics answers that sum.
 */
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue, type Registry } from 'prom-client';

/** Metrics whose sum over workers means nothing: each worker's breaker is its own, the worst one shows. */
const AGGREGATOR: Readonly<Record<string, 'max'>> = { switchyard_circuit_breaker_state: 'max' };

type Snapshot = MetricObjectWithValues<MetricValue<string>>[];

/** Worker side: this worker's figures, as the primary sums them. */
export async function localMetrics(registry: Registry): Promise<Snapshot> {
  return (await registry.getMetricsAsJSON()) as Snapshot;
}

/** Primary side: every worker's figures summed into Prometheus text. */
export async function aggregateMetrics(snapshots: readonly unknown[]): Promise<{ contentType: string; body: string }> {
  const arr = snapshots.map((s) => (s as Snapshot).map((m) => (AGGREGATOR[m.name] ? { ...m, aggregator: AGGREGATOR[m.name] } : m)));
  const registry = AggregatorRegistry.aggregate(arr);
  return { contentType: registry.contentType, body: await registry.metrics() };
}
