/**
 * Live latency statistics per target: exponentially weighted moving averages of time to first
 * token (streams) and of total latency, fed by real traffic. Pure: callers pass `now`.
 * A failure is recorded as a penalty sample so a failing target sinks in the `latency` order and
 * has to earn its place back (exploration gives it the chance).
 */

export interface LatencyEstimate {
  /** ms; undefined until observed */
  ttft: number | undefined;
  total: number | undefined;
  samples: number;
  lastObserved: number | undefined;
}

export class Ewma {
  value: number | undefined;
  constructor(private readonly alpha: number) {}
  observe(v: number): void {
    this.value = this.value === undefined ? v : this.value + this.alpha * (v - this.value);
  }
}

export class TargetStats {
  private readonly ttft: Ewma;
  private readonly total: Ewma;
  private samples = 0;
  private lastObserved: number | undefined;

  constructor(
    alpha = 0.3,
    private readonly penaltyMs = 10_000,
  ) {
    this.ttft = new Ewma(alpha);
    this.total = new Ewma(alpha);
  }

  observeSuccess(now: number, totalMs: number, ttftMs?: number): void {
    this.total.observe(totalMs);
    if (ttftMs !== undefined) this.ttft.observe(ttftMs);
    this.samples++;
    this.lastObserved = now;
  }

  observeFailure(now: number): void {
    const penalty = Math.max(this.penaltyMs, 2 * (this.total.value ?? 0));
    this.total.observe(penalty);
    if (this.ttft.value !== undefined) this.ttft.observe(Math.max(this.penaltyMs, 2 * this.ttft.value));
    this.samples++;
    this.lastObserved = now;
  }

  estimate(): LatencyEstimate {
    return { ttft: this.ttft.value, total: this.total.value, samples: this.samples, lastObserved: this.lastObserved };
  }
}
