import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LatencyWindow, OutcomeWindow, TargetStats } from './stats.ts';

describe('OutcomeWindow', () => {
  it('counts successes and failures over the window and forgets older buckets', () => {
    const w = new OutcomeWindow(60_000, 6); // 10 s buckets
    let now = 1_000_000;
    w.record(now, true);
    w.record(now, false);
    w.record(now + 5_000, false);
    assert.deepEqual(w.totals(now + 5_000), { ok: 1, failed: 2 });
    now += 30_000;
    w.record(now, true);
    assert.deepEqual(w.totals(now), { ok: 2, failed: 2 });
    // 70 s after the first ones: only the one recorded 30 s in is left
    assert.deepEqual(w.totals(1_000_000 + 70_000), { ok: 1, failed: 0 });
    assert.deepEqual(w.totals(1_000_000 + 200_000), { ok: 0, failed: 0 });
  });

  it('reuses a slot once its bucket has gone out of the window', () => {
    const w = new OutcomeWindow(60_000, 6);
    w.record(0, false);
    w.record(60_000, true); // same slot, a new bucket
    assert.deepEqual(w.totals(60_000), { ok: 1, failed: 0 });
  });
});

describe('LatencyWindow', () => {
  it('reports nearest-rank p50 and p95 of what it holds, and nothing when empty', () => {
    const w = new LatencyWindow(256, 300_000);
    assert.deepEqual(w.percentiles(0), { samples: 0, p50_ms: null, p95_ms: null });
    for (let i = 100; i >= 1; i--) w.record(10, i); // 1..100 ms, out of order
    assert.deepEqual(w.percentiles(10), { samples: 100, p50_ms: 50, p95_ms: 95 });
  });

  it('keeps only the last `capacity` samples', () => {
    const w = new LatencyWindow(4, 300_000);
    for (const ms of [1000, 1000, 1000, 1, 2, 3, 4]) w.record(0, ms);
    assert.deepEqual(w.percentiles(0), { samples: 4, p50_ms: 2, p95_ms: 4 });
  });

  it('drops samples older than maxAgeMs', () => {
    const w = new LatencyWindow(16, 1000);
    w.record(0, 500);
    w.record(900, 20);
    assert.deepEqual(w.percentiles(1500), { samples: 1, p50_ms: 20, p95_ms: 20 });
    assert.equal(w.percentiles(5000).samples, 0);
  });
});

describe('TargetStats', () => {
  it('measures successful calls only; failures count in the error window and set the last error', () => {
    const s = new TargetStats();
    s.observeSuccess(1000, 40, 12);
    s.observeSuccess(1100, 60);
    s.observeFailure(1200, { message: 'connect ECONNREFUSED 127.0.0.1:1', code: 'upstream_unreachable', status: 502 });
    const r = s.report(1300);
    assert.equal(r.ok, 2);
    assert.equal(r.failed, 1);
    assert.deepEqual(r.latency, { samples: 2, p50_ms: 40, p95_ms: 60 });
    assert.deepEqual(r.ttft, { samples: 1, p50_ms: 12, p95_ms: 12 });
    assert.deepEqual(r.last_error, { message: 'connect ECONNREFUSED 127.0.0.1:1', code: 'upstream_unreachable', status: 502, at: 1200 });
    // the policy's score still takes the failure as a penalty sample
    assert.ok((s.estimate().total ?? 0) > 1000);
  });

  it('a target that only failed has no measured latency', () => {
    const s = new TargetStats();
    for (let t = 0; t < 5; t++) s.observeFailure(t * 100, { message: 'refused', code: 'upstream_unreachable', status: 502 });
    const r = s.report(1000);
    assert.deepEqual(r.latency, { samples: 0, p50_ms: null, p95_ms: null });
    assert.equal(r.failed, 5);
    assert.equal(r.ok, 0);
    assert.ok((s.estimate().total ?? 0) >= 10_000, 'the score is the penalty, not a measurement');
  });

  it('forgets failures after the window, keeps the last error', () => {
    const s = new TargetStats(0.3, 10_000, 60_000);
    s.observeFailure(0, { message: 'boom' });
    assert.equal(s.report(1000).failed, 1);
    const later = s.report(10 * 60_000);
    assert.equal(later.failed, 0);
    assert.equal(later.last_error?.message, 'boom');
    assert.equal(later.last_error?.code, null);
  });
});
