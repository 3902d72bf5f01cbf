import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { estimateCost, orderTargets, stableUnit, type PolicyCandidate, type PolicyInput } from './policies.ts';

const noLatency = { ttft: undefined, total: undefined, samples: 0, lastObserved: undefined };
const cand = (p: Partial<PolicyCandidate> = {}): PolicyCandidate => ({ weight: 1, price: undefined, failureRate: 0, latency: noLatency, ...p });
const seq = (...xs: number[]): (() => number) => {
  let i = 0;
  return () => xs[i++ % xs.length] as number;
};
const input = (p: Partial<PolicyInput> = {}): PolicyInput => ({
  promptTokens: 1000,
  maxOutputTokens: 500,
  stream: false,
  rand: seq(0.5),
  stickyKey: undefined,
  exploreRate: 0,
  now: 100_000,
  staleMs: 60_000,
  ...p,
});

describe('fallback', () => {
  it('keeps configuration order', () => {
    assert.deepEqual(orderTargets('fallback', [cand(), cand(), cand()], input()), [0, 1, 2]);
  });
});

describe('weighted', () => {
  const cands = [cand({ weight: 95 }), cand({ weight: 5 }), cand({ weight: 0 })];
  it('draws the first target by weight; the rest follow in order; weight 0 is drained', () => {
    assert.deepEqual(orderTargets('weighted', cands, input({ rand: seq(0.1) })), [0, 1]);
    assert.deepEqual(orderTargets('weighted', cands, input({ rand: seq(0.96) })), [1, 0]);
  });
  it('splits traffic in proportion to weight', () => {
    let r = 0;
    const counts = [0, 0, 0];
    for (let i = 0; i < 1000; i++) {
      const first = orderTargets('weighted', cands, input({ rand: () => ((r = (r * 9301 + 49297) % 233280), r / 233280) }))[0] as number;
      counts[first] = (counts[first] as number) + 1;
    }
    assert.ok((counts[0] as number) > 900 && (counts[0] as number) < 990, `95% share, got ${counts[0]}`);
    assert.equal(counts[2], 0);
  });
  it('is sticky per key: the same key always gets the same first target', () => {
    const firsts = new Set<number>();
    for (let i = 0; i < 20; i++) firsts.add(orderTargets('weighted', [cand(), cand()], input({ rand: Math.random, stickyKey: 'team-a/chat' }))[0] as number);
    assert.equal(firsts.size, 1);
    const spread = new Set<number>();
    for (let k = 0; k < 50; k++) spread.add(orderTargets('weighted', [cand(), cand()], input({ stickyKey: `key-${k}` }))[0] as number);
    assert.equal(spread.size, 2, 'different keys land on different targets');
  });
  it('stableUnit is in [0,1)', () => {
    for (const s of ['', 'a', 'team-a', 'x'.repeat(1000)]) {
      const u = stableUnit(s);
      assert.ok(u >= 0 && u < 1);
    }
  });
});

describe('cost', () => {
  it('orders by estimated cost of this request; unpriced last', () => {
    const cands = [cand({ price: { input: 3, output: 15 } }), cand(), cand({ price: { input: 0.15, output: 0.6 } }), cand({ price: { input: 0, output: 0 } })];
    assert.deepEqual(orderTargets('cost', cands, input()), [3, 2, 0, 1]);
  });
  it('depends on the request shape: long outputs favour cheap output tokens', () => {
    const a = cand({ price: { input: 1, output: 10 } });
    const b = cand({ price: { input: 5, output: 2 } });
    assert.deepEqual(orderTargets('cost', [a, b], input({ promptTokens: 10_000, maxOutputTokens: 10 })), [0, 1]);
    assert.deepEqual(orderTargets('cost', [a, b], input({ promptTokens: 10, maxOutputTokens: 10_000 })), [1, 0]);
  });
  it('breaks ties by health, then by configuration order', () => {
    const p = { input: 1, output: 1 };
    assert.deepEqual(orderTargets('cost', [cand({ price: p, failureRate: 0.3 }), cand({ price: p, failureRate: 0 }), cand({ price: p, failureRate: 0 })], input()), [1, 2, 0]);
  });
  it('estimateCost is USD for the request', () => {
    assert.equal(estimateCost(cand({ price: { input: 2, output: 4 } }), 1_000_000, 500_000), 4);
  });
});

describe('latency', () => {
  const lat = (total: number, ttft?: number, lastObserved = 99_000) => ({ total, ttft, samples: 5, lastObserved });
  it('fastest total latency first for non-streams; ttft for streams', () => {
    const cands = [cand({ latency: lat(900, 100) }), cand({ latency: lat(300, 250) }), cand({ latency: lat(500, 50) })];
    assert.deepEqual(orderTargets('latency', cands, input()), [1, 2, 0]);
    assert.deepEqual(orderTargets('latency', cands, input({ stream: true })), [2, 0, 1]);
  });
  it('an unmeasured or stale target goes first so it gets measured', () => {
    const cands = [cand({ latency: lat(100) }), cand({ latency: lat(5000, undefined, 1000) }), cand()];
    const order = orderTargets('latency', cands, input());
    assert.deepEqual(order, [1, 2, 0]);
  });
  it('explores: with probability exploreRate a random other target goes first', () => {
    const cands = [cand({ latency: lat(100) }), cand({ latency: lat(200) }), cand({ latency: lat(300) })];
    assert.deepEqual(orderTargets('latency', cands, input({ exploreRate: 0.1, rand: seq(0.05, 0.99) })), [2, 0, 1]);
    assert.deepEqual(orderTargets('latency', cands, input({ exploreRate: 0.1, rand: seq(0.5) })), [0, 1, 2]);
  });
});
