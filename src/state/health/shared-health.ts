/**
 * Per-target health shared by replicas (`routing.shared_health: true`): one circuit breaker and one
 * latency score per (backend, model), held by the StateStore and fed by every replica's outcomes;
 * each replica mirrors it (router/shared-health.ts). MemoryStore runs this TypeScript version,
 * RedisStore the same rules in Lua (state/store/redis-scripts.ts HEALTH). Pure: callers pass
 * `now`. The rules and the events: docs/design/shared-health.md.
 */

import type { BreakerSettings } from '../../config/schema.ts';

/** The breaker's settings (routing.breaker) and the latency statistics'. */
export interface HealthSettings extends BreakerSettings {
  /** EWMA weight of a new latency sample */
  alpha: number;
  /** smallest latency penalty of a failure, ms */
  penalty_ms: number;
  /** a probe lease lives this long without a renewal */
  lease_ms: number;
}

/**
 * What a replica reports, in order: `s`/`f` an outcome while closed (`s` with `n`: a run of n
 * successes); `l` a success's latency;
 * `p` a failure's latency penalty; `A` take the probe lease, `R` renew it, `X` give it back unused;
 * `S`/`F`/`N` the outcome of this replica's probe (success, failure, neutral).
 */
export type HealthEvent =
  | { k: 's'; n?: number | undefined }
  | { k: 'f' | 'p' | 'A' | 'R' | 'X' | 'S' | 'F' | 'N' }
  | { k: 'l'; total: number; ttft?: number | undefined };

export interface HealthOp {
  /** "backend/model" */
  target: string;
  /** the replica's id: the probe lease's owner */
  owner: string;
  events: HealthEvent[];
}

export type SharedBreakerState = 'closed' | 'open' | 'half_open';

/** The shared state of one target after the op, as the replica mirrors it. */
export interface HealthView {
  state: SharedBreakerState;
  /** open: ms until it turns half-open; else 0 */
  remaining_ms: number;
  /** the current (or next) open period */
  open_ms: number;
  /** outcomes in the shared window */
  ok: number;
  fail: number;
  /** who holds the probe lease */
  probe: 'none' | 'mine' | 'other';
  /** latency score (ms); null until observed */
  total: number | null;
  ttft: number | null;
  samples: number;
  /** ms since the last latency sample; null when none */
  age_ms: number | null;
}

/** The store-side operation (StateStore.health). */
export type HealthChannel = (ops: HealthOp[], settings: HealthSettings) => Promise<HealthView[]>;

const BUCKETS = 10;

interface Entry {
  /** 0 = closed; else when the open period ends */
  until: number;
  openMs: number;
  consecutive: number;
  /** bucket number → [ok, fail] */
  buckets: Map<number, [number, number]>;
  lease: { owner: string; expires: number } | undefined;
  total: number | null;
  ttft: number | null;
  samples: number;
  observedAt: number | null;
}

export class SharedHealthTable {
  private readonly entries = new Map<string, Entry>();

  apply(ops: readonly HealthOp[], s: HealthSettings, now: number): HealthView[] {
    return ops.map((op) => this.applyOne(op, s, now));
  }

  private entry(target: string, s: HealthSettings): Entry {
    let e = this.entries.get(target);
    if (!e) {
      e = { until: 0, openMs: s.open_ms, consecutive: 0, buckets: new Map(), lease: undefined, total: null, ttft: null, samples: 0, observedAt: null };
      this.entries.set(target, e);
    }
    return e;
  }

  private applyOne(op: HealthOp, s: HealthSettings, now: number): HealthView {
    const e = this.entry(op.target, s);
    if (e.lease && e.lease.expires <= now) e.lease = undefined;
    const width = s.window_ms / BUCKETS;
    const halfOpen = (): boolean => e.until > 0 && now >= e.until;
    const open = (ms: number): void => {
      e.until = now + ms;
      e.openMs = ms;
      e.consecutive = 0;
      e.buckets.clear();
      e.lease = undefined;
    };
    const close = (): void => {
      e.until = 0;
      e.openMs = s.open_ms;
      e.consecutive = 0;
      e.buckets.clear();
      e.lease = undefined;
    };
    const totals = (): [number, number] => {
      let ok = 0;
      let fail = 0;
      for (const [n, b] of e.buckets) {
        if ((n + 1) * width <= now - s.window_ms) e.buckets.delete(n);
        else {
          ok += b[0];
          fail += b[1];
        }
      }
      return [ok, fail];
    };
    const bucket = (): [number, number] => {
      const n = Math.floor(now / width);
      let b = e.buckets.get(n);
      if (!b) {
        b = [0, 0];
        e.buckets.set(n, b);
      }
      return b;
    };
    const ewma = (v: number | null, x: number): number => (v === null ? x : v + s.alpha * (x - v));
    const mine = (): boolean => e.lease?.owner === op.owner;

    for (const ev of op.events) {
      switch (ev.k) {
        case 's':
          if (e.until !== 0) break;
          bucket()[0] += ev.n ?? 1;
          e.consecutive = 0;
          break;
        case 'f': {
          if (e.until !== 0) break;
          bucket()[1]++;
          e.consecutive++;
          if (s.consecutive_failures > 0 && e.consecutive >= s.consecutive_failures) {
            open(s.open_ms);
            break;
          }
          const [ok, fail] = totals();
          if (ok + fail >= s.min_requests && fail / (ok + fail) >= s.failure_rate) open(s.open_ms);
          break;
        }
        case 'l':
          e.total = ewma(e.total, ev.total);
          if (ev.ttft !== undefined) e.ttft = ewma(e.ttft, ev.ttft);
          e.samples++;
          e.observedAt = now;
          break;
        case 'p':
          e.total = ewma(e.total, Math.max(s.penalty_ms, 2 * (e.total ?? 0)));
          if (e.ttft !== null) e.ttft = ewma(e.ttft, Math.max(s.penalty_ms, 2 * e.ttft));
          e.samples++;
          e.observedAt = now;
          break;
        case 'A':
          if (halfOpen() && e.lease === undefined) e.lease = { owner: op.owner, expires: now + s.lease_ms };
          break;
        case 'R':
          if (e.lease && mine()) e.lease.expires = now + s.lease_ms;
          break;
        case 'X':
        case 'N':
          if (mine()) e.lease = undefined;
          break;
        case 'S':
        case 'F':
          // the probe's outcome counts while it is still half-open and nobody else holds the lease
          if (halfOpen() && (e.lease === undefined || mine())) {
            if (ev.k === 'S') close();
            else open(Math.min(e.openMs * 2, s.max_open_ms));
          }
          break;
        default: {
          const never: never = ev;
          throw new Error(`unknown health event ${JSON.stringify(never)}`);
        }
      }
    }
    const [ok, fail] = totals();
    const state: SharedBreakerState = e.until === 0 ? 'closed' : now < e.until ? 'open' : 'half_open';
    return {
      state,
      remaining_ms: state === 'open' ? e.until - now : 0,
      open_ms: e.openMs,
      ok,
      fail,
      probe: e.lease === undefined ? 'none' : mine() ? 'mine' : 'other',
      total: e.total,
      ttft: e.ttft,
      samples: e.samples,
      age_ms: e.observedAt === null ? null : now - e.observedAt,
    };
  }
}
