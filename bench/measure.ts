/**
 * Load and probes. `load` drives autocannon (its own histogram keeps whole milliseconds, so every
 * response time is also taken from its 'response' event, as a float, for sub-millisecond
 * percentiles). `probeStream` sends one streaming request at a time and times the first body byte
 * and the first content token, which autocannon cannot see.
 */
import autocannon from 'autocannon';
import { performance } from 'node:perf_hooks';
import { Client } from 'undici';
import { streamFraming } from './payloads.ts';

export interface LoadResult {
  rps: number;
  /** ms */
  p50: number;
  p99: number;
  mean: number;
  responses: number;
  /** socket errors + timeouts + non-2xx responses */
  errors: number;
  non2xx: number;
}

export interface LoadSpec {
  path: string;
  body: string;
  connections: number;
  seconds: number;
}

class Samples {
  private buf = new Float64Array(1 << 16);
  n = 0;
  push(v: number): void {
    if (this.n === this.buf.length) {
      const b = new Float64Array(this.buf.length * 2);
      b.set(this.buf);
      this.buf = b;
    }
    this.buf[this.n++] = v;
  }
  sorted(): Float64Array {
    return this.buf.slice(0, this.n).sort();
  }
}

export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i] ?? Number.NaN;
}

function run(base: string, spec: LoadSpec, samples: Samples | undefined): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const inst = autocannon(
      {
        url: `${base}${spec.path}`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: spec.body,
        connections: spec.connections,
        duration: spec.seconds,
        timeout: 10,
      },
      (err, result) => (err ? reject(err) : resolve(result)),
    );
    if (samples) inst.on('response', (_c, status, _bytes, ms) => (status < 300 ? samples.push(ms) : undefined));
  });
}

/** Runs `warmSeconds` unmeasured, then `spec.seconds` measured. */
export async function load(base: string, spec: LoadSpec, warmSeconds: number): Promise<LoadResult> {
  if (warmSeconds > 0) await run(base, { ...spec, seconds: warmSeconds }, undefined);
  const samples = new Samples();
  const r = await run(base, spec, samples);
  const sorted = samples.sorted();
  let sum = 0;
  for (const v of sorted) sum += v;
  const responses = r['2xx'] + r.non2xx;
  return {
    rps: responses / (r.duration || spec.seconds),
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    mean: sorted.length ? sum / sorted.length : Number.NaN,
    responses,
    errors: r.errors + r.timeouts + r.non2xx,
    non2xx: r.non2xx,
  };
}

export interface ProbeResult {
  /** ms to the first body byte, p50 / p99 */
  ttfb50: number;
  ttfb99: number;
  /** ms to the first content token, p50 / p99 */
  ttft50: number;
  ttft99: number;
  /** ms to the end of the stream, p50 */
  total50: number;
  /** body reads per stream, p50: about one per event when nothing buffers a paced stream */
  reads50: number;
  count: number;
  errors: number;
}

/** The upper middle of `xs` (its median for an odd count); 0 when empty. */
export const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? 0;

/** Rounds of the same probe as one: the median of each per-round figure; counts and errors added up. */
export function combineProbes(rounds: ProbeResult[]): ProbeResult {
  const med = (pick: (r: ProbeResult) => number): number => {
    const v = rounds.map(pick).sort((x, y) => x - y);
    return v.length === 0 ? Number.NaN : v.length % 2 ? (v[v.length >> 1] as number) : ((v[v.length / 2 - 1] as number) + (v[v.length / 2] as number)) / 2;
  };
  return {
    ttfb50: med((r) => r.ttfb50),
    ttfb99: med((r) => r.ttfb99),
    ttft50: med((r) => r.ttft50),
    ttft99: med((r) => r.ttft99),
    total50: med((r) => r.total50),
    reads50: med((r) => r.reads50),
    count: rounds.reduce((s, r) => s + r.count, 0),
    errors: rounds.reduce((s, r) => s + r.errors, 0),
  };
}

/**
 * One connection, one request at a time, for `seconds` (at least `minCount` requests). The first
 * content token is the first read holding the route's first content event (`streamFraming`).
 */
export async function probeStream(base: string, path: string, body: string, seconds: number, minCount = 10): Promise<ProbeResult> {
  const { firstContent } = streamFraming(path);
  const client = new Client(base, { pipelining: 1, keepAliveTimeout: 60_000 });
  const ttfb = new Samples();
  const ttft = new Samples();
  const total = new Samples();
  const reads = new Samples();
  let errors = 0;
  const until = performance.now() + seconds * 1000;
  try {
    while (performance.now() < until || total.n + errors < minCount) {
      const t0 = performance.now();
      try {
        const res = await client.request({ path, method: 'POST', headers: { 'content-type': 'application/json' }, body });
        let first = -1;
        let content = -1;
        let text = '';
        let n = 0;
        for await (const chunk of res.body as AsyncIterable<Buffer>) {
          const now = performance.now();
          n++;
          if (first < 0) first = now - t0;
          if (content < 0) {
            text += chunk.toString('utf8');
            if (text.includes(firstContent)) content = now - t0;
          }
        }
        if (res.statusCode !== 200 || content < 0) {
          errors++;
          continue;
        }
        ttfb.push(first);
        ttft.push(content);
        total.push(performance.now() - t0);
        reads.push(n);
      } catch {
        errors++;
      }
    }
  } finally {
    await client.close();
  }
  const a = ttfb.sorted();
  const b = ttft.sorted();
  return {
    ttfb50: percentile(a, 50),
    ttfb99: percentile(a, 99),
    ttft50: percentile(b, 50),
    ttft99: percentile(b, 99),
    total50: percentile(total.sorted(), 50),
    reads50: percentile(reads.sorted(), 50),
    count: total.n,
    errors,
  };
}
