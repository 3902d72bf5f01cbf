/**
 * A bounded soak inside `npm test`: bench/soak.ts's run (gateway processes in front of the fake
 * OpenAI and Anthropic upstreams) with small counts. Phase 1 mixes chat, streams, client aborts,
 * upstream 500 / 429 / hangs / mid-stream resets and stalls, embeddings, legacy completions, an
 * anthropic backend and malformed bodies; phase 2 runs client keys (one rate-limited), the cache and
 * the circuit breaker through an upstream outage and its recovery. Every request must be accounted
 * for in the metrics, nothing left in flight, sockets back to the cold count, heap (after a forced
 * GC, read through the inspector) and RSS within bounds, handles back to baseline, and every client
 * outcome one its request kind allows. `npm run soak` is the same run, longer.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runSoak, table } from '../bench/soak.ts';

describe('bounded soak (bench/soak.ts, small counts)', () => {
  it('2,000 mixed requests, then 600 through breaker/cache/limits: all accounted for, nothing leaked', { timeout: 180_000 }, async () => {
    const { phases, problems } = await runSoak({
      requests: 2000,
      concurrency: 16,
      warmup: 100,
      phase2: 600,
      settleMs: 500,
      maxSocketGrowth: 10,
      maxRssGrowthMb: 50,
      maxHeapGrowthMb: 20,
    });
    const report = phases.map((p) => `${p.name}\n${table(p.rows)}`).join('\n\n');
    process.stderr.write(`${report
      .split('\n')
      .map((l) => `# ${l}`)
      .join('\n')}\n`);
    assert.deepEqual(problems, [], report);
    assert.equal(phases.length, 2);
    const [mixed, breaker] = phases;
    assert.ok(mixed && breaker);
    for (const p of phases) {
      assert.equal(p.figures.counted, p.figures.sent, `${p.name}: requests_total`);
      assert.equal(p.figures.inFlight, 0, `${p.name}: in flight`);
      assert.ok(p.figures.sockets.after - p.figures.sockets.cold <= 10, `${p.name}: sockets`);
    }
    assert.equal(mixed.figures.sent, 2000);
    assert.equal(mixed.figures.injected, 300, '500, 429, hang, reset and stall: 3 % each');
    assert.equal(mixed.figures.outcomes['reset']?.['200 error event'], 60, 'mid-stream resets end in an error event');
    assert.equal(mixed.figures.outcomes['stall']?.['200 error event'], 60, 'mid-stream stalls end in an error event');
    assert.equal(mixed.figures.outcomes['anthropic']?.['200'], 140);
    assert.ok(breaker.figures.breakerStatesSeen?.includes(2), 'the breaker opened during the outage');
    assert.ok((breaker.figures.rateLimited ?? 0) > 0, 'the limited key was refused with 429');
    assert.ok((breaker.figures.cacheHits ?? 0) > 0, 'cache hits');
  });
});
