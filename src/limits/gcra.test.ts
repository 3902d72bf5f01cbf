import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gcra, gcraAdjust } from './gcra.ts';

const W = 60_000;

/** Runs `n` requests of `cost` at `now`, threading the TAT; returns how many passed. */
function burst(state: { tat: number }, now: number, n: number, limit: number, cost = 1): number {
  let ok = 0;
  for (let i = 0; i < n; i++) {
    const r = gcra(state.tat, now, cost, limit, W);
    if (r.allowed) {
      state.tat = r.tat;
      ok++;
    }
  }
  return ok;
}

describe('gcra', () => {
  it('allows the whole allowance as a burst, then refuses', () => {
    const s = { tat: 0 };
    assert.equal(burst(s, 1_000_000, 10, 6), 6);
    const r = gcra(s.tat, 1_000_000, 1, 6, W);
    assert.equal(r.allowed, false);
    assert.equal(r.remaining, 0);
    assert.equal(r.retryAfterMs, 10_000); // one request refills every 60 s / 6
    assert.equal(r.resetMs, 60_000);
  });

  it('refills continuously: one more every window/limit, no double burst at a boundary', () => {
    const s = { tat: 0 };
    const t0 = 5_000_000;
    assert.equal(burst(s, t0, 6, 6), 6);
    assert.equal(burst(s, t0 + 9_999, 1, 6), 0);
    assert.equal(burst(s, t0 + 10_000, 2, 6), 1);
    // a fixed window would reset at t0+60 s and allow 6 more at once; GCRA allows only what refilled
    assert.equal(burst(s, t0 + 60_000, 10, 6), 5);
    // in any 60 s span: at most limit + what refilled during it
    assert.equal(burst(s, t0 + 120_000, 10, 6), 6);
  });

  it('reports remaining and reset after each request', () => {
    const r1 = gcra(0, 1000, 1, 4, W);
    assert.deepEqual([r1.allowed, r1.remaining, r1.resetMs], [true, 3, 15_000]);
    const r2 = gcra(r1.tat, 1000, 1, 4, W);
    assert.deepEqual([r2.remaining, r2.resetMs], [2, 30_000]);
    // half an interval later: still 2 whole requests left
    const peek = gcra(r2.tat, 1000 + 7_500, 0, 4, W);
    assert.deepEqual([peek.allowed, peek.remaining, peek.resetMs], [true, 2, 22_500]);
  });

  it('costs in tokens: a request larger than what is left waits, one larger than the limit never passes', () => {
    const s = { tat: 0 };
    const now = 1_000_000;
    assert.equal(burst(s, now, 1, 1000, 700), 1);
    const r = gcra(s.tat, now, 400, 1000, W);
    assert.equal(r.allowed, false);
    assert.equal(r.remaining, 300);
    assert.equal(r.retryAfterMs, 6_000); // 100 tokens at 1000 per minute
    const huge = gcra(0, now, 1001, 1000, W);
    assert.equal(huge.allowed, false);
    assert.equal(huge.retryAfterMs, Number.POSITIVE_INFINITY);
  });

  it('exact multiples are not lost to float rounding', () => {
    const s = { tat: 0 };
    assert.equal(burst(s, 0, 7, 7), 7);
    assert.equal(burst({ tat: 0 }, 0, 100, 3, 0.1), 30);
  });
});

describe('gcraAdjust (reconcile)', () => {
  it('refunds unused tokens, never beyond a full allowance', () => {
    const now = 1_000_000;
    const reserved = gcra(0, now, 800, 1000, W);
    // only 300 were used: refund 500
    const tat = gcraAdjust(reserved.tat, now, -500, 1000, W);
    assert.equal(gcra(tat, now, 0, 1000, W).remaining, 700);
    // refunding more than was ever taken leaves it full, not above
    const over = gcraAdjust(tat, now, -5000, 1000, W);
    assert.equal(over, now);
    assert.equal(gcra(over, now, 0, 1000, W).remaining, 1000);
  });

  it('charges usage above the reservation, so the next request waits for it', () => {
    const now = 1_000_000;
    const reserved = gcra(0, now, 500, 1000, W);
    const tat = gcraAdjust(reserved.tat, now, 700, 1000, W); // 1200 used in all
    const next = gcra(tat, now, 1, 1000, W);
    assert.equal(next.allowed, false);
    assert.equal(next.remaining, 0);
    assert.ok(next.retryAfterMs > 12_000 - 1 && next.retryAfterMs < 12_100);
  });
});
