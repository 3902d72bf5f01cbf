/**
 * Per-target statistics, fed by real traffic. Pure: callers pass `now`.
 *
 * Two kinds, kept apart because they answer different questions:
 * - the latency policy's score (`estimate()`): exponentially weighted moving averages of time to
 *   first token (streams) and of total latency, where a failure counts as a penalty sample (at
 *   least `penaltyMs`, doubling) so a failing target sinks in the `latency` order and has to earn
 *   its place back. It is a ranking score, not a measurement.
 * - what an operator reads (`report()`): latency percentiles of successful calls only, counts of
 *   successes and failures over a recent window (not cleared when the breaker opens or closes),
 *   and the last failure.
 * Recording sits on the request path: it writes into rings allocated once per target, O(1), no
 * allocation except the last-error record on a failure.
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

/** Successes and failures over the last `windowMs`, in a fixed ring of time buckets. */
export class OutcomeWindow {
  private readonly starts: Float64Array;
  private readonly ok: Uint32Array;
  private readonly fail: Uint32Array;
  private readonly width: number;

  constructor(
    readonly windowMs = 300_000,
    private readonly buckets = 30,
  ) {
    this.width = windowMs / buckets;
    this.starts = new Float64Array(buckets).fill(Number.NEGATIVE_INFINITY);
    this.ok = new Uint32Array(buckets);
    this.fail = new Uint32Array(buckets);
  }

  record(now: number, success: boolean): void {
    const n = Math.floor(now / this.width);
    const i = ((n % this.buckets) + this.buckets) % this.buckets;
    const start = n * this.width;
    if (this.starts[i] !== start) {
      this.starts[i] = start;
      this.ok[i] = 0;
      this.fail[i] = 0;
    }
    if (success) this.ok[i] = (this.ok[i] as number) + 1;
    else this.fail[i] = (this.fail[i] as number) + 1;
  }

  /** Counts over the buckets that overlap (now − windowMs, now]. */
  totals(now: number): { ok: number; failed: number } {
    const oldest = now - this.windowMs;
    let ok = 0;
    let failed = 0;
    for (let i = 0; i < this.buckets; i++) {
      const s = this.starts[i] as number;
      if (s + this.width > oldest && s <= now) {
        ok += this.ok[i] as number;
        failed += this.fail[i] as number;
      }
    }
    return { ok, failed };
  }
}

export interface Percentiles {
  /** samples the percentiles were taken over */
  samples: number;
  /** ms; null without samples */
  p50_ms: number | null;
  p95_ms: number | null;
}

/** The last `capacity` durations no older than `maxAgeMs`, in a ring; percentiles by nearest rank. */
export class LatencyWindow {
  private readonly values: Float64Array;
  private readonly at: Float64Array;
  private next = 0;
  private count = 0;

  constructor(
    readonly capacity = 256,
    readonly maxAgeMs = 300_000,
  ) {
    this.values = new Float64Array(capacity);
    this.at = new Float64Array(capacity);
  }

  record(now: number, ms: number): void {
    this.values[this.next] = ms;
    this.at[this.next] = now;
    this.next = (this.next + 1) % this.capacity;
    if (this.count < this.capacity) this.count++;
  }

  percentiles(now: number): Percentiles {
    const oldest = now - this.maxAgeMs;
    const live: number[] = [];
    for (let i = 0; i < this.count; i++) if ((this.at[i] as number) > oldest) live.push(this.values[i] as number);
    if (live.length === 0) return { samples: 0, p50_ms: null, p95_ms: null };
    live.sort((a, b) => a - b);
    const rank = (p: number): number => live[Math.max(0, Math.ceil((p / 100) * live.length) - 1)] as number;
    return { samples: live.length, p50_ms: rank(50), p95_ms: rank(95) };
  }
}

/** What a failure said, as far as an operator needs it (GatewayError fits). */
export interface FailureInfo {
  message: string;
  code?: string | null | undefined;
  status?: number | undefined;
}

export interface LastError {
  message: string;
  code: string | null;
  status: number | null;
  /** epoch ms */
  at: number;
}

export interface TargetReport {
  window_ms: number;
  ok: number;
  failed: number;
  /** measured duration of successful calls (streams: until their end) */
  latency: Percentiles;
  /** measured time to first token of successful streams */
  ttft: Percentiles;
  last_error: LastError | null;
}

const MAX_MESSAGE = 500;
/** Weight of a new sample in the latency score, and the smallest penalty sample of a failure. */
export const EWMA_ALPHA = 0.3;
export const FAILURE_PENALTY_MS = 10_000;

export class TargetStats {
  private readonly ttft: Ewma;
  private readonly total: Ewma;
  private samples = 0;
  private lastObserved: number | undefined;
  private readonly outcomes: OutcomeWindow;
  private readonly latencies: LatencyWindow;
  private readonly ttfts: LatencyWindow;
  private lastError: LastError | null = null;

  constructor(
    alpha = EWMA_ALPHA,
    private readonly penaltyMs = FAILURE_PENALTY_MS,
    windowMs = 300_000,
    ringSize = 256,
  ) {
    this.ttft = new Ewma(alpha);
    this.total = new Ewma(alpha);
    this.outcomes = new OutcomeWindow(windowMs);
    this.latencies = new LatencyWindow(ringSize, windowMs);
    this.ttfts = new LatencyWindow(ringSize, windowMs);
  }

  observeSuccess(now: number, totalMs: number, ttftMs?: number): void {
    this.total.observe(totalMs);
    if (ttftMs !== undefined) this.ttft.observe(ttftMs);
    this.samples++;
    this.lastObserved = now;
    this.outcomes.record(now, true);
    this.latencies.record(now, totalMs);
    if (ttftMs !== undefined) this.ttfts.record(now, ttftMs);
  }

  observeFailure(now: number, err?: FailureInfo): void {
    const penalty = Math.max(this.penaltyMs, 2 * (this.total.value ?? 0));
    this.total.observe(penalty);
    if (this.ttft.value !== undefined) this.ttft.observe(Math.max(this.penaltyMs, 2 * this.ttft.value));
    this.samples++;
    this.lastObserved = now;
    this.outcomes.record(now, false);
    if (err) {
      const message = err.message.length > MAX_MESSAGE ? `${err.message.slice(0, MAX_MESSAGE)}…` : err.message;
      this.lastError = { message, code: err.code ?? null, status: err.status ?? null, at: now };
    }
  }

  /** The latency policy's score (see the file header): penalties included. */
  estimate(): LatencyEstimate {
    return { ttft: this.ttft.value, total: this.total.value, samples: this.samples, lastObserved: this.lastObserved };
  }

  /** What was measured recently, for /status. */
  report(now: number): TargetReport {
    const { ok, failed } = this.outcomes.totals(now);
    return {
      window_ms: this.outcomes.windowMs,
      ok,
      failed,
      latency: this.latencies.percentiles(now),
      ttft: this.ttfts.percentiles(now),
      last_error: this.lastError,
    };
  }
}
