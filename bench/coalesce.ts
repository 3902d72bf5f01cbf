/**
 * `npm run bench -- --coalesce [--ab-starts 4] [--ab-rounds 4] [--coalesce-against <rev>]`: what
 * coalescing across processes (`cache.coalesce`) costs a cache MISS. Every request is cacheable
 * (`temperature: 0`, `cache.enabled: true`) but unique (autocannon puts a fresh id in each prompt),
 * so each one looks the cache up, finds no flight, claims one in the shared store, calls upstream,
 * publishes its answer and lets the claim go. Two setups:
 *   - `server.workers: 2` on the memory store (store and flights in the primary, over IPC);
 *   - one process on `state.store: redis` (a redis-server started here, as bench/shared-health.ts
 *     does; skipped without `redis-server`);
 * each for chat JSON and chat stream, with `cache.coalesce: false` vs `true` (and `true` on
 * `--coalesce-against <rev>`'s build when given). Per round: the gateway's CPU µs per response
 * (primary and workers summed) and p50 latency at 64 connections, then p50 at one connection (where
 * a store round trip on the request's path shows undiluted by queueing). Measured as
 * shared-health.ts measures: fresh starts in alternating order, alternating rounds, the cheapest
 * round and the median.
 */
import autocannon from 'autocannon';
import { setTimeout as sleep } from 'node:timers/promises';
import { median, percentile } from './measure.ts';
import { CHAT_MODEL } from './payloads.ts';
import { cpuMs, stopProc, type Proc } from './procs.ts';
import { familyCpuMs, hasRedis, startConfigured, startRedis, stopRedis, type Redis, type SharedHealthOptions } from './shared-health.ts';

/** As --shared-health's, with a revision to compare. */
export interface CoalesceOptions extends SharedHealthOptions {
  /** a revision's gateway, run with `cache.coalesce: true` beside this checkout's */
  against?: { name: string; gateway: string[] };
}

interface Variant {
  id: string;
  label: string;
  coalesce: boolean;
  gateway?: string[];
}

interface Setup {
  id: string;
  label: string;
  workers: number;
  redis: boolean;
}

interface Kind {
  id: string;
  label: string;
  body: string;
}

interface RoundResult {
  us: number;
  redisUs: number;
  rps: number;
  p50: number;
  p50c1: number;
}

const CHAT = '/v1/chat/completions';
const messages = (s: boolean): string =>
  JSON.stringify({
    model: CHAT_MODEL,
    messages: [
      { role: 'system', content: 'You are a helpful assistant. Answer briefly.' },
      { role: 'user', content: 'Say hello in one short sentence. [<id>]' },
    ],
    max_tokens: 32,
    temperature: 0,
    ...(s ? { stream: true } : {}),
  });
const KINDS: Kind[] = [
  { id: 'chat', label: 'chat', body: messages(false) },
  { id: 'stream', label: 'stream', body: messages(true) },
];

/** Unique bodies for `seconds` at `connections`: responses, errors and the p50 (ms, float). */
function uniqueLoad(base: string, body: string, connections: number, seconds: number): Promise<{ responses: number; errors: number; rps: number; p50: number }> {
  const samples: number[] = [];
  return new Promise((resolve, reject) => {
    const inst = autocannon(
      { url: `${base}${CHAT}`, method: 'POST', headers: { 'content-type': 'application/json' }, body, idReplacement: true, connections, duration: seconds, timeout: 10 },
      (err, r) => {
        if (err) return reject(err);
        const responses = r['2xx'] + r.non2xx;
        resolve({ responses, errors: r.errors + r.timeouts + r.non2xx, rps: responses / (r.duration || seconds), p50: percentile(Float64Array.from(samples).sort(), 50) });
      },
    );
    inst.on('response', (_c, status, _b, ms) => (status < 300 ? void samples.push(ms) : undefined));
  });
}

function startGateway(o: CoalesceOptions, setup: Setup, v: Variant, redis: Redis | undefined): Promise<Proc> {
  const extra = [`cache: { enabled: true, coalesce: ${v.coalesce} }`];
  if (setup.redis && redis) extra.push(`state: { store: redis, url: "${redis.url}", key_prefix: "sy-bench-co-${v.id}:" }`);
  return startConfigured(o, { name: `switchyard (${setup.id}, coalesce ${v.id})`, file: `coalesce-${setup.id}-${v.id}.yaml`, workers: setup.workers, extra, gateway: v.gateway });
}

async function round(p: Proc, kind: Kind, redis: Redis | undefined): Promise<RoundResult> {
  const before = familyCpuMs(p.pid);
  const redis0 = redis ? cpuMs(redis.pid) : 0;
  const r = await uniqueLoad(p.url, kind.body, 64, 2);
  if (r.errors > 0) throw new Error(`${p.name}: ${r.errors} errors in a round`);
  const n = Math.max(1, r.responses);
  const us = ((familyCpuMs(p.pid) - before) * 1000) / n;
  const redisUs = redis ? ((cpuMs(redis.pid) - redis0) * 1000) / n : 0;
  const c1 = await uniqueLoad(p.url, kind.body, 1, 1);
  if (c1.errors > 0) throw new Error(`${p.name}: ${c1.errors} errors in a 1-connection round`);
  return { us, redisUs, rps: r.rps, p50: r.p50, p50c1: c1.p50 };
}

async function measure(o: CoalesceOptions, setup: Setup, kind: Kind, variants: Variant[], redis: Redis | undefined): Promise<RoundResult[][]> {
  const all: RoundResult[][] = variants.map(() => []);
  for (let start = 0; start < o.starts; start++) {
    const order = variants.map((_, i) => i);
    if (start % 2) order.reverse();
    const procs: Proc[] = [];
    try {
      for (const i of order) procs[i] = await startGateway(o, setup, variants[i] as Variant, redis);
      // JIT warm-up, nothing recorded
      for (const i of order) await uniqueLoad((procs[i] as Proc).url, kind.body, 64, 3);
      const mine: RoundResult[][] = variants.map(() => []);
      for (let r = 0; r < o.rounds; r++) {
        for (const i of r % 2 ? [...order].reverse() : order) {
          // the gateway measured before may still be finishing its last writes on the same core
          await sleep(500);
          mine[i]?.push(await round(procs[i] as Proc, kind, redis));
        }
      }
      mine.forEach((xs, i) => all[i]?.push(...xs));
      o.say(`start ${start + 1}, ${setup.id} ${kind.id}: ${variants.map((v, i) => `${v.id} ${Math.min(...(mine[i] ?? []).map((x) => x.us)).toFixed(1)}`).join(', ')} µs/resp (cheapest round)`);
    } finally {
      for (const p of procs) if (p) await stopProc(p);
    }
  }
  return all;
}

const pct = (x: number, base: number): string => `${x >= base ? '+' : ''}${(((x - base) / base) * 100).toFixed(1)}%`;

export async function coalesceScenario(o: CoalesceOptions): Promise<string> {
  const notes: string[] = [];
  let redis: Redis | undefined;
  if (hasRedis()) redis = await startRedis(o.pin.enabled ? o.pin.proxyCore : undefined);
  else notes.push('The redis setup was skipped: `redis-server` is not installed (apt-get install redis-server).');
  const setups: Setup[] = [{ id: 'workers', label: '`server.workers: 2`, memory store (IPC)', workers: 2, redis: false }];
  if (redis) setups.push({ id: 'redis', label: 'one process, `state.store: redis`', workers: 1, redis: true });
  const variants: Variant[] = [
    { id: 'off', label: 'false', coalesce: false },
    { id: 'on', label: 'true', coalesce: true },
  ];
  if (o.against) variants.push({ id: 'on-rev', label: `true (${o.against.name})`, coalesce: true, gateway: o.against.gateway });
  const rows: string[] = [];
  try {
    for (const setup of setups) {
      for (const kind of KINDS) {
        const all = await measure(o, setup, kind, variants, setup.redis ? redis : undefined);
        const off = all[0] ?? [];
        const offBest = Math.min(...off.map((x) => x.us));
        const offMedian = median(off.map((x) => x.us));
        for (const [i, v] of variants.entries()) {
          const xs = all[i] ?? [];
          const best = Math.min(...xs.map((x) => x.us));
          const mid = median(xs.map((x) => x.us));
          const vs = i === 0 ? '– | –' : `${pct(best, offBest)} | ${pct(mid, offMedian)}`;
          const redisCol = setup.redis ? median(xs.map((x) => x.redisUs)).toFixed(1) : '–';
          const ms = (f: (x: RoundResult) => number): string => median(xs.map(f)).toFixed(2);
          rows.push(`| ${setup.label} | ${kind.label} | ${v.label} | ${best.toFixed(1)} | ${mid.toFixed(1)} | ${vs} | ${ms((x) => x.p50)} | ${ms((x) => x.p50c1)} | ${median(xs.map((x) => x.rps)).toFixed(0)} | ${redisCol} |`);
        }
      }
    }
  } finally {
    if (redis) await stopRedis(redis);
  }
  return [
    `A cache miss with \`cache.coalesce\` off and on: chat (JSON and a 20-chunk stream), every request cacheable and unique, \`cache.enabled: true\`; ${o.starts} fresh starts of each gateway × ${o.rounds} alternating rounds (2 s at 64 connections, then 1 s at one); CPU per response the cheapest round and the median, latencies and responses/s the median round. Gateway CPU is the primary's and its workers', summed; ${o.pin.note}.`,
    '',
    '| setup | answer | coalesce | µs/resp (cheapest) | µs/resp (median) | vs false (cheapest) | vs false (median) | p50 ms, 64 conn | p50 ms, 1 conn | responses/s | redis-server µs/resp |',
    '|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|',
    ...rows,
    ...(notes.length ? ['', ...notes] : []),
  ].join('\n');
}
