import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import { CounterCells, HistogramCells } from './cells.ts';

/** A small deterministic generator (the same sequence every run). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
// label values a renderer must escape, and two that would collide if values were simply joined
const VALUES = ['/v1/chat/completions', 'gpt-4o', 'a"quoted"', 'back\\slash', 'new\nline', 'ab', 'a', 'b|c', ''];

describe('CounterCells and HistogramCells render as prom-client does', () => {
  it('the same observations give the same /metrics text, label for label and bucket for bucket', async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const c1 = new Counter({ name: 't_requests_total', help: 'Requests.', labelNames: ['route', 'model'], registers: [theirs] });
    const c2 = new CounterCells({ name: 't_requests_total', help: 'Requests.', labelNames: ['route', 'model'], registers: [ours] });
    const h1 = new Histogram({ name: 't_duration_seconds', help: 'Duration.', labelNames: ['model'], buckets: BOUNDS, registers: [theirs] });
    const h2 = new HistogramCells({ name: 't_duration_seconds', help: 'Duration.', labelNames: ['model'], buckets: BOUNDS, registers: [ours] });
    const r = rng(7);
    const pick = (): string => VALUES[Math.floor(r() * VALUES.length)] as string;
    for (let i = 0; i < 2000; i++) {
      const labels = { route: pick(), model: pick() };
      const by = Math.floor(r() * 4) === 0 ? r() * 100 : 1;
      c1.inc(labels, by);
      c2.inc(labels, by);
      // on a bound exactly, between bounds, zero, above the last bound
      const kind = Math.floor(r() * 4);
      const v = kind === 0 ? (BOUNDS[Math.floor(r() * BOUNDS.length)] as number) : kind === 1 ? r() * 3 : kind === 2 ? 0 : 10 + r() * 100;
      h1.observe({ model: labels.model }, v);
      h2.observe({ model: labels.model }, v);
    }
    assert.equal(await ours.metrics(), await theirs.metrics());
    // as objects too (what /status reads), leaving out the exemplar slots prom-client adds
    const plain = async (reg: Registry): Promise<unknown> =>
      (await reg.getMetricsAsJSON()).map((m) => ({ ...m, values: m.values.map((v) => ({ labels: v.labels, value: v.value, metricName: 'metricName' in v ? v.metricName : undefined })) }));
    assert.deepEqual(await plain(ours), await plain(theirs));
  });

  it("'ab' + 'c' and 'a' + 'bc' are two label combinations", async () => {
    const reg = new Registry();
    const c = new CounterCells({ name: 't_pairs_total', help: 'Pairs.', labelNames: ['x', 'y'], registers: [reg] });
    c.inc({ x: 'ab', y: 'c' });
    c.inc({ x: 'a', y: 'bc' }, 2);
    const values = (await c.get()).values.map((v) => [v.labels.x, v.labels.y, v.value]);
    assert.deepEqual(values, [
      ['ab', 'c', 1],
      ['a', 'bc', 2],
    ]);
  });

  it('values a metric cannot take are ignored instead of throwing on the request path; reset empties', async () => {
    const reg = new Registry();
    const c = new CounterCells({ name: 't_c_total', help: 'C.', labelNames: ['k'], registers: [reg] });
    const h = new HistogramCells({ name: 't_h', help: 'H.', labelNames: ['k'], buckets: [1], registers: [reg] });
    c.inc({ k: 'a' }, -1);
    c.inc({ k: 'a' }, Number.NaN);
    c.inc({ k: 'a' }, Number.POSITIVE_INFINITY);
    h.observe({ k: 'a' }, Number.NaN);
    h.observe({ k: 'a' }, Number.POSITIVE_INFINITY);
    assert.deepEqual((await c.get()).values, []);
    assert.deepEqual((await h.get()).values, []);
    c.inc({ k: 'a' });
    h.observe({ k: 'a' }, 2);
    assert.match(await reg.metrics(), /t_c_total\{k="a"\} 1\n[\s\S]*t_h_bucket\{le="1",k="a"\} 0\nt_h_bucket\{le="\+Inf",k="a"\} 1\nt_h_sum\{k="a"\} 2\nt_h_count\{k="a"\} 1/);
    reg.resetMetrics();
    assert.deepEqual((await c.get()).values, []);
    assert.deepEqual((await h.get()).values, []);
  });
});
