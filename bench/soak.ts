/**
 * `npm run soak`: a bounded load-and-soak run against a real Switchyard gateway process.
 *
 *   npm run soak [-- --requests 20000] [--concurrency 32] [--warmup 500] [--seed 1]
 *
 * Starts the fake OpenAI upstream of the tests (test/support/fake-openai-upstream.ts) in this
 * process, and a gateway process (`node --import tsx src/main.ts --config <tmp yaml>`, PORT=0; its
 * URL is read from the "listening" log line). Then drives a fixed, shuffled mix of requests at a
 * fixed concurrency and stops by itself:
 *
 *   ~50 % non-streaming chat · ~25 % streaming chat read to [DONE] · ~10 % streams the client aborts
 *   after the second event · ~10 % upstream failures on the first target (500, 429 + retry-after,
 *   hang past the target's timeout) that the gateway retries and fails over · ~5 % malformed bodies.
 *
 * Before (after a warm-up at the same concurrency) and after (client connections closed, 2 s settle,
 * then a few samples) it records the gateway's VmRSS, its open sockets (`socket:` links in
 * /proc/<pid>/fd), `switchyard_requests_total` for the chat route and `switchyard_in_flight_requests`.
 * Prints a table; exits 1 if in-flight is not 0, sockets grew by more than --max-socket-growth,
 * the metrics count differs from the requests sent, or RSS grew by more than --max-rss-growth-mb.
 */
import { mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { startFakeOpenAI, type FakeUpstream } from '../test/support/fake-openai-upstream.ts';
import { memory } from './procs.ts';

const { values: a } = parseArgs({
  options: {
    requests: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '32' },
    warmup: { type: 'string', default: '500' },
    seed: { type: 'string', default: '1' },
    'max-socket-growth': { type: 'string', default: '10' },
    'max-rss-growth-mb': { type: 'string', default: '50' },
    'settle-ms': { type: 'string', default: '2000' },
  },
});
const TOTAL = Math.max(1, Number(a.requests));
const CONCURRENCY = Math.max(1, Number(a.concurrency));
const WARMUP = Math.max(0, Number(a.warmup));
const MAX_SOCKET_GROWTH = Number(a['max-socket-growth']);
const MAX_RSS_GROWTH_KB = Number(a['max-rss-growth-mb']) * 1024;
const SETTLE_MS = Number(a['settle-ms']);
const ADMIN_KEY = 'soak-admin-key-0123456789abcdef';
const ROUTE = '/v1/chat/completions';
/** the first target's timeout for the "hang" model: the gateway gives up and fails over */
const HANG_TIMEOUT_MS = 300;
const REQUEST_TIMEOUT_MS = 30_000;

const root = join(import.meta.dirname, '..');
const t0 = performance.now();
const say = (s: string): void => void process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${s}\n`);

type Kind = 'chat' | 'stream' | 'abort' | 'err500' | 'err429' | 'hang' | 'malformed';
const MIX: ReadonlyArray<[Kind, number]> = [
  ['chat', 50],
  ['stream', 25],
  ['abort', 10],
  ['err500', 4],
  ['err429', 3],
  ['hang', 3],
  ['malformed', 5],
];
const INJECTED: ReadonlySet<Kind> = new Set(['err500', 'err429', 'hang']);

/** mulberry32: a small seeded PRNG so a run's mix and order are reproducible */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** exactly the mix's proportions of `n` (largest remainders), shuffled */
function schedule(n: number, seed: number): Kind[] {
  const weight = MIX.reduce((s, [, w]) => s + w, 0);
  const counts = MIX.map(([k, w]) => ({ k, exact: (n * w) / weight, c: Math.floor((n * w) / weight) }));
  let left = n - counts.reduce((s, x) => s + x.c, 0);
  for (const x of [...counts].sort((p, q) => q.exact - q.c - (p.exact - p.c))) {
    if (left-- <= 0) break;
    x.c++;
  }
  const out: Kind[] = counts.flatMap((x) => Array<Kind>(x.c).fill(x.k));
  const r = rng(seed);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [out[i], out[j]] = [out[j] as Kind, out[i] as Kind];
  }
  return out;
}

const MALFORMED: ReadonlyArray<{ body: string; type: string }> = [
  { body: '{"model":"soak-chat","messages":[{"role":"user","content":"hi"}', type: 'application/json' },
  { body: '{"model":"soak-chat"}', type: 'application/json' },
  { body: '{"model":"soak-chat","messages":"not an array"}', type: 'application/json' },
  { body: '{"model":42,"messages":[]}', type: 'application/json' },
  { body: '', type: 'application/json' },
  { body: '\u0000\u00ff not json at all', type: 'text/plain' },
  { body: '[1,2,3]', type: 'application/json' },
];

const MODEL_OF: Record<Exclude<Kind, 'malformed'>, string> = {
  chat: 'soak-chat',
  stream: 'soak-chat',
  abort: 'soak-slow-stream',
  err500: 'soak-err500',
  err429: 'soak-err429',
  hang: 'soak-hang',
};

function chatBody(kind: Exclude<Kind, 'malformed'>, i: number): string {
  const stream = kind === 'stream' || kind === 'abort' || (INJECTED.has(kind) && i % 2 === 0);
  return JSON.stringify({
    model: MODEL_OF[kind],
    messages: [{ role: 'user', content: `soak request ${i}: say something` }],
    max_tokens: 64,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}

function gatewayYaml(upstream: string): string {
  const ok = (b: string): string => `{ backend: ${b}, model: ok }`;
  return [
    '# generated by bench/soak.ts',
    'server: { host: 127.0.0.1, port: 0, shutdown_grace_ms: 2000 }',
    'backends:',
    `  primary: { type: openai, base_url: "${upstream}", api_key: "sk-soak-not-a-real-key" }`,
    `  secondary: { type: openai, base_url: "${upstream}", api_key: "sk-soak-not-a-real-key" }`,
    'models:',
    `  soak-chat: { targets: [ ${ok('primary')}, ${ok('secondary')} ] }`,
    '  soak-slow-stream: { targets: [ { backend: primary, model: slow-stream } ] }',
    `  soak-err500: { targets: [ { backend: primary, model: err-500 }, ${ok('secondary')} ] }`,
    `  soak-err429: { targets: [ { backend: primary, model: err-429 }, ${ok('secondary')} ] }`,
    `  soak-hang: { targets: [ { backend: primary, model: hang, timeout_ms: ${HANG_TIMEOUT_MS} }, ${ok('secondary')} ] }`,
    // fast retries, and no circuit breaker: every injected failure goes through retry + failover
    'routing:',
    '  retry: { max_retries: 1, base_delay_ms: 5, max_delay_ms: 20 }',
    '  max_retry_wait_ms: 1000',
    '  breaker: { consecutive_failures: 0, min_requests: 1000000000 }',
    `admin: { key: "${ADMIN_KEY}" }`,
    'logging: { level: info }',
    '',
  ].join('\n');
}

function scriptUpstream(up: FakeUpstream): void {
  const words = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
  up.onModel('ok', { kind: 'reply', content: words });
  up.onModel('slow-stream', { kind: 'stream', chunks: Array.from({ length: 20 }, (_, i) => `w${i} `), delayMs: 10 });
  up.onModel('err-500', { kind: 'error', status: 500, message: 'injected 500' });
  up.onModel('err-429', { kind: 'error', status: 429, message: 'injected 429', headers: { 'retry-after-ms': '10' } });
  up.onModel('hang', { kind: 'hang' });
}

interface Gateway {
  child: ChildProcess;
  pid: number;
  url: string;
  stderr: () => string;
}

async function startGateway(configPath: string): Promise<Gateway> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', '--config', configPath], {
    cwd: root,
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d: string) => (err = (err + d).slice(-4000)));
  child.stdout.setEncoding('utf8');
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`gateway: no "listening" line after 30 s: ${err.slice(-1500)}`)), 30_000);
    const onExit = (code: number | null): void => reject(new Error(`gateway exited early (${code}): ${err.slice(-1500)}`));
    child.once('exit', onExit);
    const onData = (d: string): void => {
      buf += d;
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        let parsed: unknown;
        try {
          parsed = JSON.parse(line);
        } catch {
          continue;
        }
        if (typeof parsed === 'object' && parsed !== null && 'msg' in parsed && parsed.msg === 'listening' && 'url' in parsed && typeof parsed.url === 'string') {
          clearTimeout(timer);
          child.off('exit', onExit);
          child.stdout.off('data', onData);
          child.stdout.resume(); // keep draining the access log
          resolve(parsed.url);
          return;
        }
      }
    };
    child.stdout.on('data', onData);
  });
  if (child.pid === undefined) throw new Error('gateway: no pid');
  return { child, pid: child.pid, url, stderr: () => err };
}

async function stopGateway(g: Gateway): Promise<void> {
  if (g.child.exitCode !== null || g.child.signalCode !== null) return;
  const done = new Promise<void>((r) => g.child.once('exit', () => r()));
  g.child.kill('SIGTERM');
  const t = setTimeout(() => g.child.kill('SIGKILL'), 10_000);
  await done;
  clearTimeout(t);
}

function openSockets(pid: number): number {
  let n = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) n++;
    } catch {
      // closed while listing
    }
  }
  return n;
}

interface Scrape {
  /** switchyard_requests_total{route="/v1/chat/completions"} by status class */
  byClass: Map<string, number>;
  requests: number;
  inFlight: number;
  retries: number;
  failovers: number;
  attempts: Map<string, number>;
}

function labelsOf(line: string): Map<string, string> {
  const m = new Map<string, string>();
  const inner = /\{(.*)\}/.exec(line)?.[1] ?? '';
  for (const x of inner.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) m.set(x[1] as string, x[2] as string);
  return m;
}

async function scrape(base: string): Promise<Scrape> {
  const r = await request(`${base}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`/metrics answered ${r.statusCode}: ${text.slice(0, 300)}`);
  const s: Scrape = { byClass: new Map(), requests: 0, inFlight: 0, retries: 0, failovers: 0, attempts: new Map() };
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    const name = line.slice(0, line.search(/[{ ]/));
    const l = labelsOf(line);
    if (name === 'switchyard_requests_total' && l.get('route') === ROUTE) {
      s.requests += value;
      const c = l.get('status_class') ?? '?';
      s.byClass.set(c, (s.byClass.get(c) ?? 0) + value);
    } else if (name === 'switchyard_in_flight_requests') s.inFlight += value;
    else if (name === 'switchyard_retries_total') s.retries += value;
    else if (name === 'switchyard_failovers_total') s.failovers += value;
    else if (name === 'switchyard_upstream_attempts_total') {
      const k = `${l.get('backend') ?? '?'}:${l.get('outcome') ?? '?'}`;
      s.attempts.set(k, (s.attempts.get(k) ?? 0) + value);
    }
  }
  return s;
}

/** what the client saw, by kind → outcome ("200", "400", "aborted", "transport:UND_ERR_…", …) */
type Outcomes = Map<Kind, Map<string, number>>;

function count(o: Outcomes, kind: Kind, outcome: string): void {
  let m = o.get(kind);
  if (!m) o.set(kind, (m = new Map()));
  m.set(outcome, (m.get(outcome) ?? 0) + 1);
}

async function one(base: string, agent: Agent, kind: Kind, i: number, o: Outcomes): Promise<void> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error('client timeout')), REQUEST_TIMEOUT_MS);
  let body: string;
  let type = 'application/json';
  if (kind === 'malformed') {
    const m = MALFORMED[i % MALFORMED.length] as (typeof MALFORMED)[number];
    body = m.body;
    type = m.type;
  } else body = chatBody(kind, i);
  try {
    const r = await request(`${base}${ROUTE}`, { method: 'POST', dispatcher: agent, headers: { 'content-type': type }, body, signal: abort.signal });
    const sse = (r.headers['content-type'] ?? '').toString().startsWith('text/event-stream');
    if (kind === 'abort' && sse) {
      let events = 0;
      try {
        for await (const chunk of r.body) {
          events += String(chunk).split('\n\n').length - 1;
          if (events >= 2) {
            abort.abort(new Error('soak: client abort'));
            break;
          }
        }
      } catch {
        // the abort itself
      }
      count(o, kind, events >= 2 ? 'aborted mid-stream' : `${r.statusCode} ended before abort`);
      return;
    }
    const text = await r.body.text();
    let outcome = String(r.statusCode);
    if (sse && r.statusCode === 200 && !text.trimEnd().endsWith('data: [DONE]')) outcome = '200 stream without [DONE]';
    count(o, kind, outcome);
  } catch (err) {
    const e = err as { code?: string; message?: string };
    count(o, kind, `transport:${e.code ?? e.message ?? 'error'}`);
  } finally {
    clearTimeout(timer);
  }
}

async function drive(base: string, kinds: Kind[], concurrency: number, o: Outcomes, label: string): Promise<number> {
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 10_000, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS });
  const started = performance.now();
  let next = 0;
  let done = 0;
  const step = Math.max(1, Math.floor(kinds.length / 10));
  const worker = async (): Promise<void> => {
    for (let i = next++; i < kinds.length; i = next++) {
      await one(base, agent, kinds[i] as Kind, i, o);
      if (++done % step === 0) say(`${label}: ${done}/${kinds.length}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, kinds.length) }, worker));
  await agent.close();
  return performance.now() - started;
}

interface Sample {
  rssKb: number;
  sockets: number;
}
const sample = (pid: number): Sample => ({ rssKb: memory(pid)?.rssKb ?? 0, sockets: openSockets(pid) });

/** waits `settleMs`, then samples `n` times one second apart; returns the samples (last is "after") */
async function settle(pid: number, settleMs: number, n = 4): Promise<Sample[]> {
  await sleep(settleMs);
  const out: Sample[] = [sample(pid)];
  for (let k = 1; k < n; k++) {
    await sleep(1000);
    out.push(sample(pid));
  }
  return out;
}

const mb = (kb: number): string => `${(kb / 1024).toFixed(1)} MB`;

function table(rows: Array<[string, string]>): string {
  const w = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `| ${k.padEnd(w)} | ${v} |`).join('\n');
}

async function main(): Promise<void> {
  const up = await startFakeOpenAI();
  scriptUpstream(up);
  const trim = setInterval(() => (up.requests.length = 0), 1000); // the fake records every request
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-soak-'));
  const configPath = join(dir, 'soak.yaml');
  writeFileSync(configPath, gatewayYaml(up.url));
  let gw: Gateway | undefined;
  try {
    gw = await startGateway(configPath);
    say(`gateway pid ${gw.pid} at ${gw.url}; fake upstream at ${up.url}`);
    for (let k = 0; k < 100; k++) {
      const r = await request(`${gw.url}/ready`);
      await r.body.dump();
      if (r.statusCode === 200) break;
      await sleep(100);
    }
    const cold = sample(gw.pid);
    const warmOutcomes: Outcomes = new Map();
    if (WARMUP > 0) {
      await drive(gw.url, schedule(WARMUP, Number(a.seed) + 1), CONCURRENCY, warmOutcomes, 'warm-up');
    }
    const beforeSamples = await settle(gw.pid, SETTLE_MS, 2);
    const before = beforeSamples[beforeSamples.length - 1] as Sample;
    const m0 = await scrape(gw.url);

    const kinds = schedule(TOTAL, Number(a.seed));
    const outcomes: Outcomes = new Map();
    let peakRss = before.rssKb;
    let peakSockets = before.sockets;
    const pid = gw.pid;
    const watch = setInterval(() => {
      const s = sample(pid);
      peakRss = Math.max(peakRss, s.rssKb);
      peakSockets = Math.max(peakSockets, s.sockets);
    }, 250);
    say(`soak: ${TOTAL} requests at concurrency ${CONCURRENCY}`);
    const ms = await drive(gw.url, kinds, CONCURRENCY, outcomes, 'soak');
    clearInterval(watch);
    say(`soak done in ${(ms / 1000).toFixed(1)} s; settling ${SETTLE_MS} ms`);

    const afterSamples = await settle(gw.pid, SETTLE_MS, 4);
    const after = afterSamples[afterSamples.length - 1] as Sample;
    const m1 = await scrape(gw.url);

    const sent = kinds.length;
    const counted = m1.requests - m0.requests;
    const injected = kinds.filter((k) => INJECTED.has(k)).length;
    const kindCount = (k: Kind): number => kinds.filter((x) => x === k).length;
    const classDelta = [...m1.byClass.entries()].map(([c, v]) => `${c} ${v - (m0.byClass.get(c) ?? 0)}`).join(', ');
    const attemptsDelta = [...m1.attempts.entries()]
      .map(([k, v]) => [k, v - (m0.attempts.get(k) ?? 0)] as const)
      .filter(([, v]) => v > 0)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    const rssGrowth = after.rssKb - before.rssKb;
    const socketGrowth = after.sockets - before.sockets;

    const rows: Array<[string, string]> = [
      ['requests sent', `${sent} (chat ${kindCount('chat')}, stream ${kindCount('stream')}, client-aborted stream ${kindCount('abort')}, upstream failure ${injected}, malformed ${kindCount('malformed')})`],
      ['upstream failures injected', `${injected}: 500 ×${kindCount('err500')}, 429 ×${kindCount('err429')}, hang past ${HANG_TIMEOUT_MS} ms ×${kindCount('hang')}`],
      ['concurrency · duration', `${CONCURRENCY} · ${(ms / 1000).toFixed(1)} s (${Math.round((sent * 1000) / ms)} req/s)`],
      ['warm-up before baseline', `${WARMUP} requests, same mix`],
      ['gateway RSS cold · before · peak · after', `${mb(cold.rssKb)} · ${mb(before.rssKb)} · ${mb(peakRss)} · ${mb(after.rssKb)} (after − before ${rssGrowth >= 0 ? '+' : ''}${mb(rssGrowth)})`],
      ['RSS settle samples (1 s apart)', afterSamples.map((s) => mb(s.rssKb)).join(', ')],
      ['gateway sockets cold · before · peak · after', `${cold.sockets} · ${before.sockets} · ${peakSockets} · ${after.sockets} (samples ${afterSamples.map((s) => s.sockets).join(', ')})`],
      ['requests_total (chat route) delta', `${counted} (${classDelta})`],
      ['in_flight_requests at end', String(m1.inFlight)],
      ['retries · failovers (delta)', `${m1.retries - m0.retries} · ${m1.failovers - m0.failovers}`],
      ['upstream attempts (delta)', attemptsDelta],
    ];
    for (const [k, m] of outcomes) rows.push([`client saw: ${k}`, [...m.entries()].map(([x, n]) => `${x} ×${n}`).join(', ')]);
    process.stdout.write(`\n${table([['measure', 'value'], ['---', '---'], ...rows])}\n\n`);

    const problems: string[] = [];
    if (m1.inFlight !== 0) problems.push(`in-flight gauge is ${m1.inFlight}, not 0`);
    if (socketGrowth > MAX_SOCKET_GROWTH) problems.push(`sockets grew by ${socketGrowth} (> ${MAX_SOCKET_GROWTH})`);
    if (counted !== sent) problems.push(`requests_total counted ${counted}, sent ${sent}`);
    if (rssGrowth > MAX_RSS_GROWTH_KB) problems.push(`RSS grew by ${mb(rssGrowth)} (> ${mb(MAX_RSS_GROWTH_KB)})`);
    const transport = [...outcomes.values()].flatMap((m) => [...m.entries()]).filter(([x]) => x.startsWith('transport:'));
    if (transport.length > 0) problems.push(`client transport errors: ${transport.map(([x, n]) => `${x} ×${n}`).join(', ')}`);
    if (problems.length > 0) {
      process.stdout.write(`FAIL\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
      process.exitCode = 1;
    } else process.stdout.write('PASS\n');
  } finally {
    clearInterval(trim);
    if (gw) await stopGateway(gw);
    await up.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`soak failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
