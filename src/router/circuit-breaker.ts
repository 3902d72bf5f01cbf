/**
 * A circuit breaker per target. Pure: it owns no timers and takes `now` on every call.
 *
 *   closed ──(failure rate ≥ threshold over ≥ min_requests in the window, or N consecutive failures)──▶ open
 *   open ──(open time elapsed; the next request is the single probe)──▶ half-open
 *   half-open ──probe succeeds──▶ closed          half-open ──probe fails──▶ open (open time × 2, capped)
 *
 * Only outcomes that say something about the target count: client-fault errors and client aborts
 * are reported as `neutral` and never move the breaker (a neutral probe just frees the probe slot).
 */

import type { BreakerSettings } from '../config/schema.ts';

export type BreakerConfig = BreakerSettings;

export type BreakerState = 'closed' | 'open' | 'half_open';
export type Outcome = 'success' | 'failure' | 'neutral';

const BUCKETS = 10;

export interface BreakerSnapshot {
  state: BreakerState;
  /** failure share in the breaker's own window, which it empties when it opens or closes */
  failure_rate: number;
  /** the current (or next) open period */
  open_ms: number;
  retry_in_ms: number;
  /** when it last opened (same clock as `now`); null while closed */
  opened_at: number | null;
  /** when the open period ends; null unless open */
  open_until: number | null;
  /** half-open with its single probe request under way */
  probe_in_flight: boolean;
}

export class CircuitBreaker {
  private state: BreakerState = 'closed';
  private openUntil = 0;
  private openedAt = 0;
  private openMs: number;
  private probeInFlight = false;
  private consecutive = 0;
  /** ring of [bucketStart, successes, failures] */
  private readonly buckets: Array<{ start: number; ok: number; fail: number }> = [];

  constructor(private readonly cfg: BreakerConfig) {
    this.openMs = cfg.open_ms;
  }

  /** The state as of `now` (open turns half-open once its time is up). */
  stateAt(now: number): BreakerState {
    if (this.state === 'open' && now >= this.openUntil) return 'half_open';
    return this.state;
  }

  /** Milliseconds until a request may be let through again (0 when it may now). */
  retryInMs(now: number): number {
    const s = this.stateAt(now);
    if (s === 'closed') return 0;
    if (s === 'half_open') return this.probeInFlight ? Math.max(1000, this.openMs / 4) : 0;
    return this.openUntil - now;
  }

  /** Whether a request may go to this target now. In half-open, true only for the single probe. */
  tryAcquire(now: number): boolean {
    const s = this.stateAt(now);
    if (s === 'closed') return true;
    if (s === 'open') return false;
    if (this.probeInFlight) return false;
    this.state = 'half_open';
    this.probeInFlight = true;
    return true;
  }

  /** Whether a request would be allowed, without taking the probe slot. */
  wouldAllow(now: number): boolean {
    const s = this.stateAt(now);
    return s === 'closed' || (s === 'half_open' && !this.probeInFlight);
  }

  record(outcome: Outcome, now: number): void {
    if (this.state === 'half_open') {
      if (!this.probeInFlight) return;
      this.probeInFlight = false;
      if (outcome === 'success') this.close();
      else if (outcome === 'failure') this.open(now, Math.min(this.openMs * 2, this.cfg.max_open_ms));
      return;
    }
    if (outcome === 'neutral') return;
    if (this.state === 'open') return; // late results of requests started before it opened
    const b = this.bucket(now);
    if (outcome === 'success') {
      b.ok++;
      this.consecutive = 0;
      return;
    }
    b.fail++;
    this.consecutive++;
    if (this.cfg.consecutive_failures > 0 && this.consecutive >= this.cfg.consecutive_failures) {
      this.open(now, this.cfg.open_ms);
      return;
    }
    const { ok, fail } = this.totals(now);
    const total = ok + fail;
    if (total >= this.cfg.min_requests && fail / total >= this.cfg.failure_rate) this.open(now, this.cfg.open_ms);
  }

  /** Failure share in the current window (0 when empty); used to break ties by health. */
  failureRate(now: number): number {
    const { ok, fail } = this.totals(now);
    return ok + fail === 0 ? 0 : fail / (ok + fail);
  }

  snapshot(now: number): BreakerSnapshot {
    const state = this.stateAt(now);
    return {
      state,
      failure_rate: this.failureRate(now),
      open_ms: this.openMs,
      retry_in_ms: this.retryInMs(now),
      opened_at: state === 'closed' ? null : this.openedAt,
      open_until: state === 'open' ? this.openUntil : null,
      probe_in_flight: state === 'half_open' && this.probeInFlight,
    };
  }

  private open(now: number, ms: number): void {
    this.state = 'open';
    this.openedAt = now;
    this.openMs = ms;
    this.openUntil = now + ms;
    this.probeInFlight = false;
    this.consecutive = 0;
    this.buckets.length = 0;
  }

  private close(): void {
    this.state = 'closed';
    this.openMs = this.cfg.open_ms;
    this.consecutive = 0;
    this.buckets.length = 0;
  }

  private bucket(now: number): { start: number; ok: number; fail: number } {
    const width = this.cfg.window_ms / BUCKETS;
    const start = now - (now % width);
    const last = this.buckets[this.buckets.length - 1];
    if (last && last.start === start) return last;
    const b = { start, ok: 0, fail: 0 };
    this.buckets.push(b);
    this.prune(now);
    return b;
  }

  private prune(now: number): void {
    const oldest = now - this.cfg.window_ms;
    while (this.buckets.length > 0 && (this.buckets[0] as { start: number }).start + this.cfg.window_ms / BUCKETS <= oldest) this.buckets.shift();
  }

  private totals(now: number): { ok: number; fail: number } {
    this.prune(now);
    let ok = 0;
    let fail = 0;
    for (const b of this.buckets) {
      ok += b.ok;
      fail += b.fail;
    }
    return { ok, fail };
  }
}
