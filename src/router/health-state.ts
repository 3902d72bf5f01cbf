/**
 * Per-target health: a circuit breaker and latency statistics for each (backend, model) pair.
 * Owned outside the Router so it can outlive a configuration reload: targets that did not change
 * keep their breaker state and latency history. With `share(store)` (routing.shared_health) the
 * breakers and latency scores are the ones every replica shares through the store
 * (shared-health.ts).
 */
import type { HealthSettings } from '../state/health/shared-health.ts';
import type { StateStore } from '../state/store/contract.ts';
import type { Logger } from '../telemetry/logger.ts';
import { CircuitBreaker, type BreakerConfig, type BreakerState } from './circuit-breaker.ts';
import { PROBE_LEASE_MS, SharedCircuitBreaker, SharedHealthLink, SharedTargetStats } from './shared-health.ts';
import { EWMA_ALPHA, FAILURE_PENALTY_MS, TargetStats } from './stats.ts';

export interface TargetHealth {
  breaker: CircuitBreaker;
  stats: TargetStats;
}

export function targetKey(backend: string, model: string): string {
  return `${backend}\u0000${model}`;
}

export class HealthState {
  private readonly targets = new Map<string, TargetHealth>();
  private breakerConfig: BreakerConfig;
  private link: SharedHealthLink | undefined;
  private sharedWith: StateStore | undefined;

  constructor(
    breakerConfig: BreakerConfig,
    private readonly now: () => number = Date.now,
  ) {
    this.breakerConfig = breakerConfig;
  }

  /** New breaker settings apply to targets created from now on; existing ones keep their state. */
  configure(breakerConfig: BreakerConfig): void {
    const changed = JSON.stringify(breakerConfig) !== JSON.stringify(this.breakerConfig);
    this.breakerConfig = breakerConfig;
    if (changed) {
      this.targets.clear();
      this.link?.configure(healthSettings(breakerConfig));
    }
  }

  /**
   * Shares breakers and latency scores through `store` (undefined: each process keeps its own).
   * Switching starts every target afresh.
   */
  share(store: StateStore | undefined, logger?: Logger, syncIntervalMs?: number): void {
    const channel = store?.health?.bind(store);
    if (store === this.sharedWith && (channel === undefined) === (this.link === undefined)) return;
    this.link?.stop();
    this.sharedWith = store;
    this.link = channel === undefined ? undefined : new SharedHealthLink(channel, healthSettings(this.breakerConfig), logger, this.now, syncIntervalMs);
    this.targets.clear();
  }

  /** Sends pending outcomes and refreshes every shared target's mirror now (the periodic sync's work). */
  async sync(): Promise<void> {
    await this.link?.sync(true);
  }

  get(backend: string, model: string): TargetHealth {
    const key = targetKey(backend, model);
    let h = this.targets.get(key);
    if (!h) {
      if (this.link) {
        const t = this.link.target(`${backend}/${model}`);
        h = { breaker: new SharedCircuitBreaker(this.breakerConfig, this.link, t), stats: new SharedTargetStats(this.link, t) };
      } else h = { breaker: new CircuitBreaker(this.breakerConfig), stats: new TargetStats() };
      this.targets.set(key, h);
    }
    return h;
  }

  snapshot(now: number): Array<{ backend: string; model: string; state: BreakerState; failure_rate: number; retry_in_ms: number }> {
    return [...this.targets].map(([key, h]) => {
      const [backend = '', model = ''] = key.split('\u0000');
      const s = h.breaker.snapshot(now);
      return { backend, model, state: s.state, failure_rate: s.failure_rate, retry_in_ms: s.retry_in_ms };
    });
  }
}

function healthSettings(b: BreakerConfig): HealthSettings {
  return { ...b, alpha: EWMA_ALPHA, penalty_ms: FAILURE_PENALTY_MS, lease_ms: PROBE_LEASE_MS };
}
