/**
 * The limiter over the in-memory store, with an injected clock: no sleeps, no wall-clock asserts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError } from '../errors/gateway-error.ts';
import { MemoryStore } from '../state/store/memory.ts';
import { budgetPeriod, formatDuration, Limiter, type Principal } from './limiter.ts';
import type { LimitsConfig } from '../config/schema.ts';

function setup(limits: Partial<LimitsConfig>, start = Date.UTC(2026, 10, 30, 12, 0, 0)) {
  const clock = { t: start };
  const now = () => clock.t;
  const store = new MemoryStore({ maxEntries: 10, maxBytes: 1e6, now });
  const refused: string[] = [];
  const limiter = new Limiter(store, now, (_k, l) => refused.push(l));
  const p: Principal & { limits: LimitsConfig } = { name: 'team-a', namespace: 'key:team-a', limits: { budget_period: 'month', ...limits } };
  return { clock, limiter, p, refused, store };
}

async function refusal(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof GatewayError, String(err));
    return err;
  }
  assert.fail('expected a refusal');
}

describe('Limiter: requests per minute', () => {
  it('admits a burst of rpm, then 429 with retry-after, x-ratelimit headers and a message naming the limit', async () => {
    const { limiter, p, refused } = setup({ rpm: 3 });
    const heads: Array<Record<string, string>> = [];
    for (let i = 0; i < 3; i++) heads.push((await limiter.admit(p, 0, true)).headers);
    assert.deepEqual(
      heads.map((h) => h['x-ratelimit-remaining-requests']),
      ['2', '1', '0'],
    );
    assert.equal(heads[0]?.['x-ratelimit-limit-requests'], '3');
    assert.equal(heads[0]?.['x-ratelimit-reset-requests'], '20s');
    assert.equal(heads[2]?.['x-ratelimit-reset-requests'], '1m0s');
    const e = await refusal(limiter.admit(p, 0, true));
    assert.equal(e.status, 429);
    assert.equal(e.code, 'rate_limit_exceeded');
    assert.equal(e.type, 'rate_limit_error');
    assert.match(e.message, /requests per minute \(rpm\): Limit 3, Remaining 0/);
    assert.equal(e.retryAfter, 20);
    assert.equal(e.headers?.['retry-after-ms'], '20000');
    assert.equal(e.headers?.['x-ratelimit-remaining-requests'], '0');
    assert.deepEqual(refused, ['requests']);
  });

  it('a refused request takes nothing: the next one passes as soon as one refilled', async () => {
    const { clock, limiter, p } = setup({ rpm: 2 });
    await limiter.admit(p, 0, true);
    await limiter.admit(p, 0, true);
    for (let i = 0; i < 5; i++) await refusal(limiter.admit(p, 0, true));
    clock.t += 29_999;
    await refusal(limiter.admit(p, 0, true));
    clock.t += 1;
    const a = await limiter.admit(p, 0, true);
    assert.equal(a.headers['x-ratelimit-remaining-requests'], '0');
    // a cache hit counts as a request too
    clock.t += 30_000;
    await limiter.admit(p, 0, false);
    await refusal(limiter.admit(p, 0, false));
  });
});

describe('Limiter: tokens per minute', () => {
  it('reserves prompt + max_tokens, then reconciles with the real usage (refund)', async () => {
    const { limiter, p } = setup({ tpm: 1000 });
    const a = await limiter.admit(p, 600, true);
    assert.equal(a.headers['x-ratelimit-remaining-tokens'], '400');
    // a second 600-token reservation does not fit while the first is pending…
    const e = await refusal(limiter.admit(p, 600, true));
    assert.match(e.message, /tokens per minute \(tpm\): Limit 1000, Remaining 400, Requested 600/);
    // …but once the first used only 150 tokens, it does
    a.settle({ prompt_tokens: 100, completion_tokens: 50 }, undefined);
    await new Promise((r) => setImmediate(r));
    const b = await limiter.admit(p, 600, true);
    assert.equal(b.headers['x-ratelimit-remaining-tokens'], '250');
  });

  it('charges usage above the reservation (a request that used more than it reserved)', async () => {
    const { limiter, p } = setup({ tpm: 1000 });
    const a = await limiter.admit(p, 100, true);
    a.settle({ prompt_tokens: 400, completion_tokens: 500 }, undefined);
    await new Promise((r) => setImmediate(r));
    const e = await refusal(limiter.admit(p, 200, true));
    assert.match(e.message, /Remaining 100, Requested 200/);
  });

  it('settle is once only; refund gives everything back; unknown usage keeps the reservation', async () => {
    const { limiter, p } = setup({ tpm: 1000 });
    const a = await limiter.admit(p, 500, true);
    a.settle('refund', undefined);
    a.settle({ prompt_tokens: 900, completion_tokens: 0 }, undefined); // ignored
    await new Promise((r) => setImmediate(r));
    const b = await limiter.admit(p, 500, true);
    assert.equal(b.headers['x-ratelimit-remaining-tokens'], '500');
    b.settle(undefined, undefined);
    await new Promise((r) => setImmediate(r));
    const c = await limiter.admit(p, 500, true);
    assert.equal(c.headers['x-ratelimit-remaining-tokens'], '0');
  });

  it('a request larger than the whole tpm is refused for good (x-should-retry: false)', async () => {
    const { limiter, p } = setup({ tpm: 1000 });
    const e = await refusal(limiter.admit(p, 1500, true));
    assert.equal(e.status, 429);
    assert.equal(e.exhausted, true);
    assert.match(e.message, /Request too large .*Limit 1000, Requested 1500/);
  });

  it('cache hits reserve no tokens but report the allowance', async () => {
    const { limiter, p } = setup({ tpm: 1000 });
    await limiter.admit(p, 300, true);
    const hit = await limiter.admit(p, 5000, false);
    assert.equal(hit.headers['x-ratelimit-remaining-tokens'], '700');
  });
});

describe('Limiter: concurrency', () => {
  it('holds a lease until release; release is once only and frees the slot', async () => {
    const { limiter, p } = setup({ max_concurrent: 2 });
    const a = await limiter.admit(p, 0, true);
    const b = await limiter.admit(p, 0, true);
    const e = await refusal(limiter.admit(p, 0, true));
    assert.match(e.message, /concurrent requests \(max_concurrent\): Limit 2/);
    a.release();
    a.release();
    const c = await limiter.admit(p, 0, true);
    await refusal(limiter.admit(p, 0, true));
    b.release();
    c.release();
    await limiter.admit(p, 0, true);
    await limiter.admit(p, 0, true);
  });

  it('a lease that is never released (a crashed holder) expires', async () => {
    const { clock, limiter, p } = setup({ max_concurrent: 1 });
    await limiter.admit(p, 0, true);
    await refusal(limiter.admit(p, 0, true));
    clock.t += 121_000;
    await limiter.admit(p, 0, true);
    limiter.close();
  });

  it('cache hits take no lease', async () => {
    const { limiter, p } = setup({ max_concurrent: 1, rpm: 100 });
    await limiter.admit(p, 0, true);
    await limiter.admit(p, 0, false);
    await limiter.admit(p, 0, false);
    limiter.close();
  });
});

describe('Limiter: budget', () => {
  it('spend = usage × price; exhausted → 429 budget_exceeded until the period ends', async () => {
    const start = Date.UTC(2026, 10, 30, 23, 0, 0);
    const { clock, limiter, p } = setup({ budget_usd: 0.01, budget_period: 'day' }, start);
    const price = { input: 1, output: 4 }; // USD per 1M tokens
    const a = await limiter.admit(p, 0, true);
    a.settle({ prompt_tokens: 2000, completion_tokens: 1000 }, price); // $0.002 + $0.004
    await new Promise((r) => setImmediate(r));
    const b = await limiter.admit(p, 0, true);
    b.settle({ prompt_tokens: 2000, completion_tokens: 1000 }, price); // now $0.012
    await new Promise((r) => setImmediate(r));
    const e = await refusal(limiter.admit(p, 0, true));
    assert.equal(e.status, 429);
    assert.equal(e.code, 'budget_exceeded');
    assert.equal(e.type, 'insufficient_quota');
    assert.equal(e.exhausted, true);
    assert.equal(e.retryAfter, 3600); // the day ends at midnight UTC
    assert.match(e.message, /spent \$0\.0120 of its \$0\.01 daily budget/);
    // an unpriced target spends nothing (documented: budgets only see priced targets)
    clock.t = Date.UTC(2026, 11, 1, 0, 0, 1);
    const c = await limiter.admit(p, 0, true);
    c.settle({ prompt_tokens: 10_000_000, completion_tokens: 0 }, undefined);
    await new Promise((r) => setImmediate(r));
    await limiter.admit(p, 0, true);
  });

  it('cache hits are not refused by an exhausted budget', async () => {
    const { limiter, p } = setup({ budget_usd: 0, rpm: 10 });
    await refusal(limiter.admit(p, 0, true));
    await limiter.admit(p, 0, false);
  });
});

describe('helpers', () => {
  it('formatDuration writes Go-style durations like OpenAI', () => {
    assert.equal(formatDuration(0), '0s');
    assert.equal(formatDuration(20), '20ms');
    assert.equal(formatDuration(1500), '1.5s');
    assert.equal(formatDuration(60_000), '1m0s');
    assert.equal(formatDuration(361_000), '6m1s');
    assert.equal(formatDuration(3_600_000), '1h0m0s');
  });

  it('budgetPeriod: UTC day and month, with their ends', () => {
    const t = Date.UTC(2026, 11, 31, 23, 59, 59);
    assert.deepEqual(budgetPeriod(t, 'day'), { id: 'd2026-12-31', endsAt: Date.UTC(2027, 0, 1) });
    assert.deepEqual(budgetPeriod(t, 'month'), { id: 'm2026-12', endsAt: Date.UTC(2027, 0, 1) });
  });
});
