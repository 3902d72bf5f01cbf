/**
 * The replica's side of shared target health (routing.shared_health; the rules the store runs:
 * state/health/shared-health.ts). The request path stays synchronous: breakers decide from a local
 * mirror of the shared state, refreshed every SYNC_INTERVAL_MS; outcomes are queued and sent in the
 * background. One probe across replicas, under the store's lease. The store unreachable: each
 * breaker decides alone. The protocol, timings included: docs/design/shared-health.md.
 */
import { randomUUID } from 'node:crypto';
import type { HealthChannel, HealthEvent, HealthSettings, HealthView } from '../state/health/shared-health.ts';
import type { Logger } from '../telemetry/logger.ts';
import { CircuitBreaker, type BreakerConfig, type BreakerSnapshot, type BreakerState, type Outcome } from './circuit-breaker.ts';
import { TargetStats, type FailureInfo, type LatencyEstimate } from './stats.ts';

export const SYNC_INTERVAL_MS = 250;
export const PROBE_LEASE_MS = 5_000;
const LEASE_IDLE_MS = 1_000;
const STALE_MS = 2_000;
/** events kept per target between two sends */
const MAX_PENDING = 1_000;
/** a target with this many events queued is sent without waiting for the send on its way */
const SEND_AT = MAX_PENDING / 4;
/** successes and latency samples wait at most this long for a send */
export const QUIET_SEND_MS = 50;

export class SharedTarget {
  view: HealthView | undefined;
  /** local clock when `view` arrived */
  at = 0;
  /** breaker and probe events, in order (a run of successes is one event with its count) */
  pending: HealthEvent[] = [];
  /** latency samples, in order */
  latency: HealthEvent[] = [];
  /** this replica's probe lease */
  lease: 'none' | 'acquiring' | 'won' | 'in_flight' = 'none';
  leaseAt = 0;
  /** a request found it open or half-open since it last closed: worth taking the lease */
  wanted = false;
  /** bumped by local changes to `view`, so an answer to an older send does not undo them */
  version = 0;

  constructor(readonly name: string) {}
}

export class SharedHealthLink {
  readonly owner = randomUUID();
  private readonly targets = new Map<string, SharedTarget>();
  private readonly timer: NodeJS.Timeout | undefined;
  private flushQueued = false;
  private quietTimer: NodeJS.Timeout | undefined;
  /** something other than successes and latency samples is queued */
  private urgent = false;
  private ticking = false;
  /** sends of queued events (not ticks) waiting for their answer */
  private inFlight = 0;
  /** events were queued while a send was on its way: send them once it is answered */
  private again = false;
  /** a target reached SEND_AT queued events */
  private full = false;
  private down = false;

  constructor(
    private readonly channel: HealthChannel,
    private settings: HealthSettings,
    private readonly logger: Logger | undefined,
    readonly now: () => number = Date.now,
    intervalMs = SYNC_INTERVAL_MS,
  ) {
    if (intervalMs > 0) {
      this.timer = setInterval(() => void this.sync(true), intervalMs);
      this.timer.unref();
    }
  }

  configure(settings: HealthSettings): void {
    this.settings = settings;
  }

  target(name: string): SharedTarget {
    let t = this.targets.get(name);
    if (!t) {
      t = new SharedTarget(name);
      this.targets.set(name, t);
      this.flushSoon();
    }
    return t;
  }

  /** The mirror when it may decide: the store answered recently. */
  usable(t: SharedTarget, now: number): HealthView | undefined {
    if (this.down || t.view === undefined || now - t.at > STALE_MS) return undefined;
    return t.view;
  }

  /** The mirrored state as of `now` (an open period that ended here reads half-open). */
  stateAt(t: SharedTarget, v: HealthView, now: number): BreakerState {
    if (v.state === 'open') return now < t.at + v.remaining_ms ? 'open' : 'half_open';
    return v.state;
  }

  /** Queues an event for the next send; false when dropped (store unreachable, or too many queued). */
  push(t: SharedTarget, e: HealthEvent): boolean {
    if (this.down || t.pending.length + t.latency.length >= MAX_PENDING) return false;
    if (e.k === 'l' || e.k === 'p') t.latency.push(e);
    else {
      const last = t.pending[t.pending.length - 1];
      if (e.k === 's' && last !== undefined && last.k === 's') last.n = (last.n ?? 1) + 1;
      else t.pending.push(e);
    }
    if (t.pending.length + t.latency.length >= SEND_AT) this.full = true;
    if (e.k !== 's' && e.k !== 'l') this.urgent = true;
    this.schedule();
    return true;
  }

  /** The next send: right after this tick when something urgent is queued, else within QUIET_SEND_MS. */
  private schedule(): void {
    if (this.urgent || this.full) this.flushSoon();
    else if (this.quietTimer === undefined && !this.flushQueued) {
      this.quietTimer = setTimeout(() => {
        this.quietTimer = undefined;
        this.flushSoon();
      }, QUIET_SEND_MS);
      this.quietTimer.unref();
    }
  }

  private flushSoon(): void {
    if (this.quietTimer !== undefined) {
      clearTimeout(this.quietTimer);
      this.quietTimer = undefined;
    }
    if (this.flushQueued) return;
    this.flushQueued = true;
    setImmediate(() => {
      this.flushQueued = false;
      void this.sync(false);
    });
  }

  /**
   * Sends what is pending and refreshes the mirror: every target (`all`, the periodic tick, with
   * lease upkeep) or only those with something to send.
   */
  async sync(all: boolean): Promise<void> {
    if (all) {
      if (this.ticking) return;
      this.ticking = true;
    } else if (this.inFlight > 0 && !this.full) {
      this.again = true;
      return;
    } else {
      this.inFlight++;
      this.full = false;
      this.urgent = false;
    }
    try {
      const now = this.now();
      const sent: Array<{ t: SharedTarget; version: number }> = [];
      const ops = [];
      for (const t of this.targets.values()) {
        if (all) this.upkeep(t, now);
        if (!all && t.pending.length === 0 && t.latency.length === 0) continue;
        ops.push({ target: t.name, owner: this.owner, events: t.latency.length === 0 ? t.pending : t.pending.concat(t.latency) });
        sent.push({ t, version: t.version });
        t.pending = [];
        t.latency = [];
      }
      if (ops.length === 0) return;
      let views: HealthView[];
      try {
        views = await this.channel(ops, this.settings);
      } catch (err) {
        this.lost(err);
        return;
      }
      if (this.down) {
        this.down = false;
        this.logger?.warn('shared breaker state reachable again', {});
      }
      const at = this.now();
      sent.forEach(({ t, version }, i) => {
        const v = views[i];
        if (v === undefined || version !== t.version) return;
        t.view = v;
        t.at = at;
        if (t.lease === 'acquiring' || t.lease === 'won') {
          if (v.probe === 'mine') {
            if (t.lease === 'acquiring') t.leaseAt = at;
            t.lease = 'won';
          } else t.lease = 'none';
        }
        if (v.state === 'closed') t.wanted = false;
      });
    } finally {
      if (all) this.ticking = false;
      else this.inFlight--;
      if (this.again && this.inFlight === 0) {
        this.again = false;
        this.schedule();
      }
    }
  }

  private upkeep(t: SharedTarget, now: number): void {
    if (t.lease === 'in_flight') t.pending.push({ k: 'R' });
    else if (t.lease === 'won' && now - t.leaseAt > LEASE_IDLE_MS) {
      t.pending.push({ k: 'X' });
      t.lease = 'none';
    } else if (t.lease === 'none' && t.wanted && t.view !== undefined && t.view.probe === 'none' && this.stateAt(t, t.view, now) === 'half_open') {
      t.pending.push({ k: 'A' });
      t.lease = 'acquiring';
    }
  }

  private lost(err: unknown): void {
    for (const t of this.targets.values()) {
      t.pending = [];
      t.latency = [];
      if (t.lease === 'acquiring') t.lease = 'none';
    }
    if (this.down) return;
    this.down = true;
    this.logger?.warn('shared breaker state unavailable: each replica uses its own breakers meanwhile', {
      error: err instanceof Error ? err.message.slice(0, 200) : 'unknown',
    });
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.quietTimer !== undefined) clearTimeout(this.quietTimer);
  }
}

/**
 * A breaker that decides from the shared mirror when it can and from its own (local) state
 * otherwise; the local state is fed every outcome either way.
 */
export class SharedCircuitBreaker extends CircuitBreaker {
  constructor(
    private readonly config: BreakerConfig,
    private readonly link: SharedHealthLink,
    private readonly t: SharedTarget,
  ) {
    super(config);
  }

  override stateAt(now: number): BreakerState {
    const v = this.link.usable(this.t, now);
    return v ? this.link.stateAt(this.t, v, now) : super.stateAt(now);
  }

  override retryInMs(now: number): number {
    const v = this.link.usable(this.t, now);
    if (!v) return super.retryInMs(now);
    const s = this.link.stateAt(this.t, v, now);
    if (s === 'closed') return 0;
    if (s === 'open') return this.t.at + v.remaining_ms - now;
    return this.t.lease === 'won' ? 0 : Math.max(1000, v.open_ms / 4);
  }

  override tryAcquire(now: number): boolean {
    const v = this.link.usable(this.t, now);
    if (!v) return super.tryAcquire(now);
    const s = this.link.stateAt(this.t, v, now);
    if (s === 'closed') return true;
    this.t.wanted = true;
    if (s === 'open') return false;
    if (this.t.lease === 'won') {
      this.t.lease = 'in_flight';
      this.t.leaseAt = now;
      return true;
    }
    if (this.t.lease === 'none' && v.probe !== 'other' && this.link.push(this.t, { k: 'A' })) this.t.lease = 'acquiring';
    return false;
  }

  override wouldAllow(now: number): boolean {
    const v = this.link.usable(this.t, now);
    if (!v) return super.wouldAllow(now);
    const s = this.link.stateAt(this.t, v, now);
    return s === 'closed' || (s === 'half_open' && this.t.lease === 'won');
  }

  override record(outcome: Outcome, now: number): void {
    super.record(outcome, now);
    const t = this.t;
    if (t.lease === 'in_flight') {
      t.lease = 'none';
      this.link.push(t, { k: outcome === 'success' ? 'S' : outcome === 'failure' ? 'F' : 'N' });
      const v = t.view;
      if (v === undefined) return;
      // until the store answers, this replica acts on its own probe's outcome
      t.version++;
      t.at = now;
      if (outcome === 'success') t.view = { ...v, state: 'closed', remaining_ms: 0, open_ms: this.config.open_ms, ok: 0, fail: 0, probe: 'none' };
      else if (outcome === 'failure') {
        const ms = Math.min(v.open_ms * 2, this.config.max_open_ms);
        t.view = { ...v, state: 'open', remaining_ms: ms, open_ms: ms, ok: 0, fail: 0, probe: 'none' };
      } else t.view = { ...v, probe: 'none' };
      return;
    }
    if (outcome !== 'neutral') this.link.push(t, { k: outcome === 'success' ? 's' : 'f' });
  }

  override failureRate(now: number): number {
    const v = this.link.usable(this.t, now);
    if (!v) return super.failureRate(now);
    return v.ok + v.fail === 0 ? 0 : v.fail / (v.ok + v.fail);
  }

  override snapshot(now: number): BreakerSnapshot {
    const v = this.link.usable(this.t, now);
    if (!v) return super.snapshot(now);
    const state = this.link.stateAt(this.t, v, now);
    const openUntil = this.t.at + v.remaining_ms;
    return {
      state,
      failure_rate: this.failureRate(now),
      open_ms: v.open_ms,
      retry_in_ms: this.retryInMs(now),
      opened_at: state === 'closed' ? null : openUntil - v.open_ms,
      open_until: state === 'open' ? openUntil : null,
      probe_in_flight: state === 'half_open' && (v.probe === 'other' || this.t.lease === 'in_flight'),
    };
  }
}

/** Latency statistics whose score (estimate) is the shared one; the operator's report stays local. */
export class SharedTargetStats extends TargetStats {
  constructor(
    private readonly link: SharedHealthLink,
    private readonly t: SharedTarget,
  ) {
    super();
  }

  override observeSuccess(now: number, totalMs: number, ttftMs?: number): void {
    super.observeSuccess(now, totalMs, ttftMs);
    this.link.push(this.t, { k: 'l', total: totalMs, ttft: ttftMs });
  }

  override observeFailure(now: number, err?: FailureInfo): void {
    super.observeFailure(now, err);
    this.link.push(this.t, { k: 'p' });
  }

  override estimate(): LatencyEstimate {
    const now = this.link.now();
    const v = this.link.usable(this.t, now);
    if (!v || v.samples === 0) return super.estimate();
    return {
      ttft: v.ttft ?? undefined,
      total: v.total ?? undefined,
      samples: v.samples,
      lastObserved: v.age_ms === null ? undefined : this.t.at - v.age_ms,
    };
  }
}
