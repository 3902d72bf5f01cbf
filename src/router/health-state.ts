/**
 * Per-target health: a circuit breaker and latency statistics for each (backend, model) pair.
 * Owned outside the Router so it can outlive a configuration reload: targets that did not change
 * keep their breaker state and latency history.
 */
import { CircuitBreaker, type BreakerConfig, type BreakerState } from './circuit-breaker.ts';
import { TargetStats } from './stats.ts';

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

  constructor(breakerConfig: BreakerConfig) {
    this.breakerConfig = breakerConfig;
  }

  /** New breaker settings apply to targets created from now on; existing ones keep their state. */
  configure(breakerConfig: BreakerConfig): void {
    const changed = JSON.stringify(breakerConfig) !== JSON.stringify(this.breakerConfig);
    this.breakerConfig = breakerConfig;
    if (changed) this.targets.clear();
  }

  get(backend: string, model: string): TargetHealth {
    const key = targetKey(backend, model);
    let h = this.targets.get(key);
    if (!h) {
      h = { breaker: new CircuitBreaker(this.breakerConfig), stats: new TargetStats() };
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
