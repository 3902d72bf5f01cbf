/**
 * `npm run soak`: a bounded load-and-soak run against real Switchyard gateway processes.
 *
 *   npm run soak [-- --requests 20000] [--concurrency 32] [--warmup 500] [--seed 1]
 *                [--mix full|basic] [--phase2 <requests>] [--settle-ms 2000]
 *                [--max-socket-growth 10] [--max-rss-growth-mb 50] [--max-heap-growth-mb 20]
 *
 * Starts the tests' fake OpenAI and Anthropic upstreams (test/support/) in this process and, per
 * phase, a gateway process (`node --inspect=127.0.0.1:0 --import tsx src/main.ts --config <tmp
 * yaml>`, PORT=0; its URL is read from the "listening" log line). Then drives a fixed, seeded,
 * shuffled mix of requests at a fixed concurrency and stops by itself.
 *
 * Phase 1, "mixed traffic" (`--mix full`, the default; `--mix basic` is the earlier chat-only mix):
 * chat, streams read to [DONE], streams the client aborts, upstream 500 / 429 / hang before the
 * answer (retried and failed over), upstream resets and stalls mid-stream (an error event, no
 * [DONE]), embeddings, legacy completions, an `anthropic` backend, malformed bodies. Circuit breaker
 * off, so every injected failure goes through retry and failover.
 *
 * Phase 2, "breaker, cache and limits" (`--phase2 N`, default a fifth of --requests; 0 skips it):
 * a second gateway with client keys (one limited to 60 rpm), the response cache on and the circuit
 * breaker on; one upstream target fails every request for the first 60 % of the phase and then
 * recovers — the breaker opens, probes half-open, and closes again, while every request is still
 * answered through the fallback target.
 *
 * Before (after a warm-up at the same concurrency) and after (client connections closed, settled)
 * each phase records the gateway's VmRSS, its open sockets (`socket:` links in /proc/<pid>/fd), its
 * heap after a forced GC and its active handles by type (both through the inspector protocol), and
 * the metrics. Exits 1 if in-flight is not 0, `requests_total` differs from the requests sent,
 * sockets, RSS or heap grew beyond their bounds, timers or handles did not return to baseline, or a
 * client saw an outcome its request kind does not allow.
 *
 * `runSoak(options)` is the same run as a function (test/soak.test.ts runs a small one).
 */
import { mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request, WebSocket } from 'undici';
import { startFakeOpenAI, type FakeUpstream } from '../test/support/fake-openai-upstream.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../test/support/fake-anthropic-upstream.ts';
import { mulberry32 } from '../test/support/prng.ts';
import { memory } from './procs.ts';

export interface SoakOptions {
  /** phase 1 requests (after the warm-up) */
  requests: number;
  concurrency: number;
  /** warm-up requests of the same mix before each phase's baseline */
  warmup: number;
  seed: number;
  mix: 'full' | 'basic';
  /** phase 2 requests (breaker, cache, limits); 0 skips the phase */
  phase2: number;
  /** wait before the first "after" sample */
  settleMs: number;
  maxSocketGrowth: number;
  maxRssGrowthMb: number;
  maxHeapGrowthMb: number;
  /** progress lines */
  log: (line: string) => void;
}

export const DEFAULTS: SoakOptions = {
  requests: 20_000,
  concurrency: 32,
  warmup: 500,
  seed: 1,
  mix: 'full',
  phase2: 4_000,
  settleMs: 2000,
  maxSocketGrowth: 10,
  maxRssGrowthMb: 50,
  maxHeapGrowthMb: 20,
  log: () => undefined,
};

const ADMIN_KEY = 'soak-admin-key-0123456789abcdef';
const MAIN_KEY = 'sk-soak-main-client-key-0001';
const LIMITED_KEY = 'sk-soak-limited-client-key-0001';
const LIMITED_RPM = 60;
const API_ROUTES = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings'];
/** the first target's timeout for the "hang" model: the gateway gives up and fails over */
const HANG_TIMEOUT_MS = 300;
/** stream idle timeout of the backend whose streams stall mid-way */
const STALL_IDLE_MS = 300;
const REQUEST_TIMEOUT_MS = 30_000;
/** phase 2: the flaky target fails until this share of the phase has been sent */
const OUTAGE_SHARE = 0.6;

const root = join(import.meta.dirname, '..');

type Kind =
  | 'chat'
  | 'stream'
  | 'abort'
  | 'err500'
  | 'err429'
  | 'hang'
  | 'reset'
  | 'stall'
  | 'embed'
  | 'completion'
  | 'anthropic'
  | 'malformed'
  // phase 2
  | 'cached'
  | 'flaky'
  | 'limited';

type Mix = ReadonlyArray<readonly [Kind, number]>;
const BASIC_MIX: Mix = [
  ['chat', 50],
  ['stream', 25],
  ['abort', 10],
  ['err500', 4],
  ['err429', 3],
  ['hang', 3],
  ['malformed', 5],
];
const FULL_MIX: Mix = [
  ['chat', 34],
  ['stream', 18],
  ['abort', 8],
  ['err500', 3],
  ['err429', 3],
  ['hang', 3],
  ['reset', 3],
  ['stall', 3],
  ['embed', 7],
  ['completion', 6],
  ['anthropic', 7],
  ['malformed', 5],
];
const PHASE2_MIX: Mix = [
  ['chat', 30],
  ['cached', 25],
  ['flaky', 30],
  ['limited', 15],
];
/** upstream failures injected on purpose (before the answer, or mid-stream) */
const INJECTED: ReadonlySet<Kind> = new Set(['err500', 'err429', 'hang', 'reset', 'stall']);

/** what a client may see for each kind; anything else fails the run */
const EXPECTED: Record<Kind, readonly string[]> = {
  chat: ['200'],
  stream: ['200'],
  abort: ['aborted mid-stream'],
  err500: ['200'],
  err429: ['200'],
  hang: ['200'],
  reset: ['200 error event'],
  stall: ['200 error event'],
  embed: ['200'],
  completion: ['200'],
  anthropic: ['200'],
  malformed: ['400'],
  cached: ['200'],
  flaky: ['200'],
  limited: ['200', '429'],
};

/** exactly the mix's proportions of `n` (largest remainders), shuffled */
function schedule(mix: Mix, n: number, seed: number): Kind[] {
  const weight = mix.reduce((s, [, w]) => s + w, 0);
  const counts = mix.map(([k, w]) => ({ k, exact: (n * w) / weight, c: Math.floor((n * w) / weight) }));
  let left = n - counts.reduce((s, x) => s + x.c, 0);
  for (const x of [...counts].sort((p, q) => q.exact - q.c - (p.exact - p.c))) {
    if (left-- <= 0) break;
    x.c++;
  }
  const out: Kind[] = counts.flatMap((x) => Array<Kind>(x.c).fill(x.k));
  const r = mulberry32(seed);
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

const CHAT_MODEL: Partial<Record<Kind, string>> = {
  chat: 'soak-chat',
  stream: 'soak-chat',
  abort: 'soak-slow-stream',
  err500: 'soak-err500',
  err429: 'soak-err429',
  hang: 'soak-hang',
  reset: 'soak-reset',
  stall: 'soak-stall',
  anthropic: 'soak-claude',
  cached: 'soak-chat',
  flaky: 'soak-flaky',
  limited: 'soak-chat',
};

interface Planned {
  path: string;
  body: string;
  type: string;
  key?: string;
}

function plan(kind: Kind, i: number, phase2: boolean): Planned {
  const json = (path: string, o: Record<string, unknown>): Planned => ({ path, body: JSON.stringify(o), type: 'application/json', ...(phase2 ? { key: kind === 'limited' ? LIMITED_KEY : MAIN_KEY } : {}) });
  const half = i % 2 === 0;
  switch (kind) {
    case 'malformed': {
      const m = MALFORMED[i % MALFORMED.length] as (typeof MALFORMED)[number];
      return { path: '/v1/chat/completions', body: m.body, type: m.type };
    }
    case 'embed':
      return json('/v1/embeddings', { model: 'soak-embed', input: half ? `soak embedding ${i}` : [`soak a ${i}`, `soak b ${i}`], ...(i % 4 === 1 ? { encoding_format: 'base64' } : {}) });
    case 'completion':
      return json('/v1/completions', { model: 'soak-complete', prompt: `soak prompt ${i}:`, max_tokens: 64, ...(half ? { stream: true } : {}) });
    default: {
      const stream = kind === 'stream' || kind === 'abort' || kind === 'reset' || kind === 'stall' || ((INJECTED.has(kind) || kind === 'anthropic' || kind === 'cached' || kind === 'flaky') && half);
      // cached: one of ten prompts at temperature 0 (cacheable); everything else is unique
      const content = kind === 'cached' ? `soak cached question ${i % 10}` : `soak request ${i}: say something`;
      return json('/v1/chat/completions', {
        model: CHAT_MODEL[kind],
        messages: [{ role: 'user', content }],
        max_tokens: 64,
        ...(kind === 'cached' ? { temperature: 0 } : {}),
        ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
      });
    }
  }
}

function phase1Yaml(openai: string, anthropic: string): string {
  const ok = (b: string): string => `{ backend: ${b}, model: ok }`;
  return [
    '# generated by bench/soak.ts (phase 1)',
    'server: { host: 127.0.0.1, port: 0, shutdown_grace_ms: 2000 }',
    'backends:',
    `  primary: { type: openai, base_url: "${openai}", api_key: "sk-soak-not-a-real-key" }`,
    `  secondary: { type: openai, base_url: "${openai}", api_key: "sk-soak-not-a-real-key" }`,
    `  staller: { type: openai, base_url: "${openai}", api_key: "sk-soak-not-a-real-key", stream_idle_timeout_ms: ${STALL_IDLE_MS} }`,
    `  claude: { type: anthropic, base_url: "${anthropic}", api_key: "sk-ant-soak-not-a-real-key" }`,
    'models:',
    `  soak-chat: { targets: [ ${ok('primary')}, ${ok('secondary')} ] }`,
    '  soak-slow-stream: { targets: [ { backend: primary, model: slow-stream } ] }',
    `  soak-err500: { targets: [ { backend: primary, model: err-500 }, ${ok('secondary')} ] }`,
    `  soak-err429: { targets: [ { backend: primary, model: err-429 }, ${ok('secondary')} ] }`,
    `  soak-hang: { targets: [ { backend: primary, model: hang, timeout_ms: ${HANG_TIMEOUT_MS} }, ${ok('secondary')} ] }`,
    // mid-stream faults come after the commit point: no failover, an error event instead
    `  soak-reset: { targets: [ { backend: primary, model: reset-mid }, ${ok('secondary')} ] }`,
    `  soak-stall: { targets: [ { backend: staller, model: stall-mid }, ${ok('secondary')} ] }`,
    '  soak-embed: { targets: [ { backend: primary, model: text-embedding-3-small } ] }',
    `  soak-complete: { targets: [ ${ok('primary')}, ${ok('secondary')} ] }`,
    '  soak-claude: { targets: [ { backend: claude, model: claude-test-1 } ] }',
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

function phase2Yaml(openai: string): string {
  return [
    '# generated by bench/soak.ts (phase 2: breaker, cache, limits)',
    'server: { host: 127.0.0.1, port: 0, shutdown_grace_ms: 2000 }',
    'backends:',
    `  primary: { type: openai, base_url: "${openai}", api_key: "sk-soak-not-a-real-key" }`,
    `  secondary: { type: openai, base_url: "${openai}", api_key: "sk-soak-not-a-real-key" }`,
    `  flaky: { type: openai, base_url: "${openai}", api_key: "sk-soak-not-a-real-key" }`,
    'models:',
    '  soak-chat: { targets: [ { backend: primary, model: ok }, { backend: secondary, model: ok } ] }',
    '  soak-flaky: { targets: [ { backend: flaky, model: flaky }, { backend: secondary, model: ok } ] }',
    'keys:',
    `  - { name: soak-main, key: "${MAIN_KEY}" }`,
    `  - { name: soak-limited, key: "${LIMITED_KEY}", limits: { rpm: ${LIMITED_RPM} } }`,
    'cache: { enabled: true, ttl_seconds: 600 }',
    'routing:',
    '  retry: { max_retries: 1, base_delay_ms: 5, max_delay_ms: 20 }',
    '  max_retry_wait_ms: 1000',
    '  breaker: { consecutive_failures: 5, failure_rate: 0.5, min_requests: 20, window_ms: 5000, open_ms: 200, max_open_ms: 1000 }',
    `admin: { key: "${ADMIN_KEY}" }`,
    'logging: { level: info }',
    '',
  ].join('\n');
}

const WORDS = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');

function scriptUpstream(up: FakeUpstream): void {
  up.onModel('ok', { kind: 'reply', content: WORDS });
  up.onModel('slow-stream', { kind: 'stream', chunks: Array.from({ length: 20 }, (_, i) => `w${i} `), delayMs: 10 });
  up.onModel('err-500', { kind: 'error', status: 500, message: 'injected 500' });
  up.onModel('err-429', { kind: 'error', status: 429, message: 'injected 429', headers: { 'retry-after-ms': '10' } });
  up.onModel('hang', { kind: 'hang' });
  up.onModel('reset-mid', { kind: 'stream', chunks: Array.from({ length: 10 }, (_, i) => `r${i} `), dropAfter: 3 });
  up.onModel('stall-mid', { kind: 'stream', chunks: Array.from({ length: 10 }, (_, i) => `s${i} `), stallAfter: 3 });
  up.onModel('flaky', { kind: 'error', status: 500, message: 'injected outage' });
}

// ---------------------------------------------------------------------------------------------
// the gateway process and what can be read from it

interface Gateway {
  child: ChildProcess;
  pid: number;
  url: string;
  inspector: Inspector;
  stderr: () => string;
}

/** A minimal Chrome DevTools Protocol client for the gateway's --inspect port. */
class Inspector {
  private next = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private constructor(private readonly ws: WebSocket) {
    ws.addEventListener('message', (ev) => {
      const msg = JSON.parse(String(ev.data)) as { id?: number; result?: unknown; error?: { message: string } };
      if (msg.id === undefined) return;
      const w = this.waiting.get(msg.id);
      if (!w) return;
      this.waiting.delete(msg.id);
      if (msg.error) w.reject(new Error(msg.error.message));
      else w.resolve(msg.result);
    });
  }

  static async connect(url: string): Promise<Inspector> {
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener('open', () => resolve());
      ws.addEventListener('error', () => reject(new Error(`inspector: cannot connect to ${url}`)));
    });
    return new Inspector(ws);
  }

  call(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  async evaluate(expression: string): Promise<unknown> {
    const r = (await this.call('Runtime.evaluate', { expression, returnByValue: true })) as { result?: { value?: unknown } };
    return r.result?.value;
  }

  /** heapUsed after full GCs */
  async heapAfterGc(): Promise<number> {
    for (let i = 0; i < 3; i++) {
      await this.call('HeapProfiler.collectGarbage');
      await sleep(50);
    }
    return Number(await this.evaluate('process.memoryUsage().heapUsed'));
  }

  /** process.getActiveResourcesInfo() by type */
  async handles(): Promise<Record<string, number>> {
    const list = JSON.parse(String(await this.evaluate('JSON.stringify(process.getActiveResourcesInfo())'))) as string[];
    const out: Record<string, number> = {};
    for (const t of list) out[t] = (out[t] ?? 0) + 1;
    return out;
  }

  close(): void {
    this.ws.close();
  }
}

async function startGateway(configPath: string): Promise<Gateway> {
  const child = spawn(process.execPath, ['--inspect=127.0.0.1:0', '--import', 'tsx', 'src/main.ts', '--config', configPath], {
    cwd: root,
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  let inspectorUrl: (u: string) => void = () => undefined;
  const wsUrl = new Promise<string>((r) => (inspectorUrl = r));
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d: string) => {
    err = (err + d).slice(-4000);
    const m = /Debugger listening on (ws:\/\/\S+)/.exec(err);
    if (m) inspectorUrl(m[1] as string);
  });
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
  const inspector = await Inspector.connect(await wsUrl);
  return { child, pid: child.pid, url, inspector, stderr: () => err };
}

async function stopGateway(g: Gateway): Promise<void> {
  g.inspector.close();
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
  /** switchyard_requests_total over the API routes, by status class */
  byClass: Map<string, number>;
  byRoute: Map<string, number>;
  byCache: Map<string, number>;
  requests: number;
  inFlight: number;
  retries: number;
  failovers: number;
  attempts: Map<string, number>;
  rateLimited: number;
  /** circuit breaker state by backend (max over models): 0 closed, 1 half-open, 2 open */
  breaker: Map<string, number>;
}

function labelsOf(line: string): Map<string, string> {
  const m = new Map<string, string>();
  const inner = /\{(.*)\}/.exec(line)?.[1] ?? '';
  for (const x of inner.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) m.set(x[1] as string, x[2] as string);
  return m;
}

const bump = (m: Map<string, number>, k: string, v: number): void => void m.set(k, (m.get(k) ?? 0) + v);

async function scrape(base: string, control: Agent): Promise<Scrape> {
  const r = await request(`${base}/metrics`, { dispatcher: control, headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`/metrics answered ${r.statusCode}: ${text.slice(0, 300)}`);
  const s: Scrape = { byClass: new Map(), byRoute: new Map(), byCache: new Map(), requests: 0, inFlight: 0, retries: 0, failovers: 0, attempts: new Map(), rateLimited: 0, breaker: new Map() };
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    const name = line.slice(0, line.search(/[{ ]/));
    const l = labelsOf(line);
    if (name === 'switchyard_requests_total' && API_ROUTES.includes(l.get('route') ?? '')) {
      s.requests += value;
      bump(s.byClass, l.get('status_class') ?? '?', value);
      bump(s.byRoute, l.get('route') ?? '?', value);
      bump(s.byCache, l.get('cache') ?? '?', value);
    } else if (name === 'switchyard_in_flight_requests') s.inFlight += value;
    else if (name === 'switchyard_retries_total') s.retries += value;
    else if (name === 'switchyard_failovers_total') s.failovers += value;
    else if (name === 'switchyard_rate_limited_total') s.rateLimited += value;
    else if (name === 'switchyard_upstream_attempts_total') bump(s.attempts, `${l.get('backend') ?? '?'}:${l.get('outcome') ?? '?'}`, value);
    else if (name === 'switchyard_circuit_breaker_state') {
      const b = l.get('backend') ?? '?';
      s.breaker.set(b, Math.max(s.breaker.get(b) ?? 0, value));
    }
  }
  return s;
}

const delta = (a: Map<string, number>, b: Map<string, number>): string =>
  [...b.entries()]
    .map(([k, v]) => [k, v - (a.get(k) ?? 0)] as const)
    .filter(([, v]) => v !== 0)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

// ---------------------------------------------------------------------------------------------
// the load

/** what the client saw, by kind → outcome ("200", "400", "aborted mid-stream", "transport:…", …) */
type Outcomes = Map<Kind, Map<string, number>>;

function count(o: Outcomes, kind: Kind, outcome: string): void {
  let m = o.get(kind);
  if (!m) o.set(kind, (m = new Map()));
  m.set(outcome, (m.get(outcome) ?? 0) + 1);
}

async function one(base: string, agent: Agent, kind: Kind, i: number, phase2: boolean, o: Outcomes): Promise<void> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(new Error('client timeout')), REQUEST_TIMEOUT_MS);
  const p = plan(kind, i, phase2);
  try {
    const headers: Record<string, string> = { 'content-type': p.type };
    if (p.key) headers['authorization'] = `Bearer ${p.key}`;
    const r = await request(`${base}${p.path}`, { method: 'POST', dispatcher: agent, headers, body: p.body, signal: abort.signal });
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
    if (sse && r.statusCode === 200 && !text.trimEnd().endsWith('data: [DONE]')) outcome = text.includes('data: {"error":') ? '200 error event' : '200 stream without [DONE]';
    count(o, kind, outcome);
  } catch (err) {
    const e = err as { code?: string; message?: string };
    count(o, kind, `transport:${e.code ?? e.message ?? 'error'}`);
  } finally {
    clearTimeout(timer);
  }
}

async function drive(base: string, kinds: Kind[], concurrency: number, phase2: boolean, o: Outcomes, label: string, log: (s: string) => void, before?: (i: number) => void): Promise<number> {
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 10_000, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS });
  const started = performance.now();
  let next = 0;
  let done = 0;
  const step = Math.max(1, Math.floor(kinds.length / 10));
  const worker = async (): Promise<void> => {
    for (let i = next++; i < kinds.length; i = next++) {
      before?.(i);
      await one(base, agent, kinds[i] as Kind, i, phase2, o);
      if (++done % step === 0) log(`${label}: ${done}/${kinds.length}`);
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

/**
 * Waits `settleMs`, then samples once a second: at least `min` samples, and on (up to `max`) while
 * the sockets are still above `socketBound` (idle pooled upstream connections close on the
 * upstream's keep-alive timeout, a few seconds after the last request).
 */
async function settle(pid: number, settleMs: number, min: number, max = min, socketBound = Infinity): Promise<Sample[]> {
  await sleep(settleMs);
  const out: Sample[] = [sample(pid)];
  while (out.length < min || (out.length < max && (out[out.length - 1] as Sample).sockets > socketBound)) {
    await sleep(1000);
    out.push(sample(pid));
  }
  return out;
}

const mb = (kb: number): string => `${(kb / 1024).toFixed(1)} MB`;
const mbBytes = (b: number): string => `${(b / 1024 / 1024).toFixed(1)} MB`;
const signed = (s: string, v: number): string => `${v >= 0 ? '+' : ''}${s}`;

export interface PhaseResult {
  name: string;
  rows: Array<[string, string]>;
  problems: string[];
  figures: {
    sent: number;
    counted: number;
    inFlight: number;
    injected: number;
    durationMs: number;
    rssKb: { cold: number; before: number; peak: number; after: number };
    sockets: { cold: number; before: number; peak: number; after: number };
    heapBytes: { before: number; after: number };
    handles: { before: Record<string, number>; after: Record<string, number> };
    outcomes: Record<string, Record<string, number>>;
    /** phase 2 */
    breakerStatesSeen?: number[];
    rateLimited?: number;
    cacheHits?: number;
  };
}

interface PhaseSpec {
  name: string;
  yaml: string;
  mix: Mix;
  requests: number;
  phase2: boolean;
}

async function runPhase(spec: PhaseSpec, o: SoakOptions, up: FakeUpstream, dir: string): Promise<PhaseResult> {
  const configPath = join(dir, `${spec.phase2 ? 'phase2' : 'phase1'}.yaml`);
  writeFileSync(configPath, spec.yaml);
  scriptUpstream(up);
  const gw = await startGateway(configPath);
  // /ready and /metrics go over one connection of their own, open from before the cold sample to
  // the end, so they add the same single socket to every reading
  const control = new Agent({ connections: 1 });
  try {
    o.log(`${spec.name}: gateway pid ${gw.pid} at ${gw.url}`);
    for (let k = 0; k < 100; k++) {
      const r = await request(`${gw.url}/ready`, { dispatcher: control });
      await r.body.dump();
      if (r.statusCode === 200) break;
      await sleep(100);
    }
    const cold = sample(gw.pid);
    if (o.warmup > 0) await drive(gw.url, schedule(spec.phase2 ? PHASE2_MIX.filter(([k]) => k !== 'flaky' && k !== 'limited') : spec.mix, o.warmup, o.seed + 1), o.concurrency, spec.phase2, new Map(), `${spec.name} warm-up`, o.log);
    // heap and handles are read after a forced GC, so a short settle is enough for the baseline;
    // sockets are judged against the cold count (before any upstream connection was pooled)
    const beforeSamples = await settle(gw.pid, o.settleMs, 1);
    const before = beforeSamples[beforeSamples.length - 1] as Sample;
    const heap0 = await gw.inspector.heapAfterGc();
    const handles0 = await gw.inspector.handles();
    const m0 = await scrape(gw.url, control);

    const kinds = schedule(spec.mix, spec.requests, o.seed);
    const outcomes: Outcomes = new Map();
    let peakRss = before.rssKb;
    let peakSockets = before.sockets;
    const pid = gw.pid;
    const watch = setInterval(() => {
      const s = sample(pid);
      peakRss = Math.max(peakRss, s.rssKb);
      peakSockets = Math.max(peakSockets, s.sockets);
    }, 250);
    // phase 2: the flaky target is down until OUTAGE_SHARE of the phase was sent; the breaker is watched
    const breakerSeen = new Set<number>();
    let watching = spec.phase2;
    const breakerWatch = (async () => {
      while (watching) {
        try {
          breakerSeen.add((await scrape(gw.url, control)).breaker.get('flaky') ?? 0);
        } catch {
          // a scrape lost under load is not a finding
        }
        await sleep(50);
      }
    })();
    const recoverAt = Math.floor(kinds.length * OUTAGE_SHARE);
    let recovered = false;
    const onDispatch = (i: number): void => {
      if (spec.phase2 && !recovered && i >= recoverAt) {
        recovered = true;
        up.onModel('flaky', { kind: 'reply', content: WORDS });
        o.log(`${spec.name}: flaky upstream recovered at request ${i}`);
      }
    };
    if (spec.phase2) up.onModel('flaky', { kind: 'error', status: 500, message: 'injected outage' });
    o.log(`${spec.name}: ${kinds.length} requests at concurrency ${o.concurrency}`);
    const ms = await drive(gw.url, kinds, o.concurrency, spec.phase2, outcomes, spec.name, o.log, onDispatch);
    // phase 2: if the load ended while the breaker was still open (its open time backs off up to
    // max_open_ms), keep sending flaky requests one at a time until it has probed and closed again
    let tail = 0;
    if (spec.phase2) {
      const tailAgent = new Agent({ connections: 1 });
      const until = performance.now() + 15_000;
      for (;;) {
        const m = await scrape(gw.url, control);
        const served = (m.attempts.get('flaky:success') ?? 0) - (m0.attempts.get('flaky:success') ?? 0);
        if (((m.breaker.get('flaky') ?? 0) === 0 && served > 0) || performance.now() > until) break;
        await one(gw.url, tailAgent, 'flaky', kinds.length + tail, true, outcomes);
        tail++;
        await sleep(100);
      }
      await tailAgent.close();
    }
    clearInterval(watch);
    // a few more breaker readings after the load
    await sleep(300);
    watching = false;
    await breakerWatch;
    o.log(`${spec.name}: done in ${(ms / 1000).toFixed(1)} s; settling`);

    const afterSamples = await settle(gw.pid, o.settleMs, 3, 15, cold.sockets);
    const after = afterSamples[afterSamples.length - 1] as Sample;
    const heap1 = await gw.inspector.heapAfterGc();
    const handles1 = await gw.inspector.handles();
    const m1 = await scrape(gw.url, control);

    const sent = kinds.length + tail;
    const counted = m1.requests - m0.requests;
    const kindCount = (k: Kind): number => kinds.filter((x) => x === k).length;
    const injected = kinds.filter((k) => INJECTED.has(k)).length;
    const rssGrowth = after.rssKb - before.rssKb;
    const socketGrowth = after.sockets - cold.sockets;
    const heapGrowth = heap1 - heap0;
    const cacheHits = (m1.byCache.get('hit') ?? 0) - (m0.byCache.get('hit') ?? 0);
    const rateLimited = m1.rateLimited - m0.rateLimited;

    const rows: Array<[string, string]> = [
      ['requests sent', `${sent} (${spec.mix.map(([k]) => `${k} ${kindCount(k)}`).join(', ')}${tail > 0 ? `; + ${tail} flaky one at a time after the load, until the breaker closed` : ''})`],
    ];
    if (!spec.phase2) {
      rows.push([
        'upstream failures injected',
        `${injected}: 500 ×${kindCount('err500')}, 429 ×${kindCount('err429')}, hang past ${HANG_TIMEOUT_MS} ms ×${kindCount('hang')}, reset mid-stream ×${kindCount('reset')}, stall mid-stream ×${kindCount('stall')}; client aborts mid-stream ×${kindCount('abort')}`,
      ]);
    } else {
      rows.push(['upstream failures injected', `flaky target down for the first ${OUTAGE_SHARE * 100} % of the phase: ${kinds.slice(0, recoverAt).filter((k) => k === 'flaky').length} of ${kindCount('flaky')} flaky requests`]);
    }
    rows.push(
      ['concurrency · duration', `${o.concurrency} · ${(ms / 1000).toFixed(1)} s (${Math.round((sent * 1000) / ms)} req/s)`],
      ['warm-up before baseline', `${o.warmup} requests`],
      ['gateway RSS cold · before · peak · after', `${mb(cold.rssKb)} · ${mb(before.rssKb)} · ${mb(peakRss)} · ${mb(after.rssKb)} (after − before ${signed(mb(rssGrowth), rssGrowth)})`],
      ['RSS settle samples (1 s apart)', afterSamples.map((s) => mb(s.rssKb)).join(', ')],
      ['gateway heap after GC before · after', `${mbBytes(heap0)} · ${mbBytes(heap1)} (${signed(mbBytes(heapGrowth), heapGrowth)})`],
      ['gateway sockets cold · before · peak · after', `${cold.sockets} · ${before.sockets} · ${peakSockets} · ${after.sockets} (after − cold ${signed(String(socketGrowth), socketGrowth)}; samples 1 s apart ${afterSamples.map((s) => s.sockets).join(', ')})`],
      ['active handles before → after', `${JSON.stringify(handles0)} → ${JSON.stringify(handles1)}`],
      ['requests_total (API routes) delta', `${counted} (${delta(m0.byClass, m1.byClass)}; ${delta(m0.byRoute, m1.byRoute)})`],
      ['in_flight_requests at end', String(m1.inFlight)],
      ['retries · failovers (delta)', `${m1.retries - m0.retries} · ${m1.failovers - m0.failovers}`],
      ['upstream attempts (delta)', delta(m0.attempts, m1.attempts)],
    );
    if (spec.phase2) {
      rows.push(
        ['circuit breaker states seen (flaky)', `${[...breakerSeen].sort().map((s) => ['closed', 'half-open', 'open'][s] ?? String(s)).join(', ')}; at end: ${['closed', 'half-open', 'open'][m1.breaker.get('flaky') ?? 0]}`],
        ['cache hits · rate limited (429)', `${cacheHits} · ${rateLimited}`],
      );
    }
    for (const [k, m] of outcomes) rows.push([`client saw: ${k}`, [...m.entries()].map(([x, n]) => `${x} ×${n}`).join(', ')]);

    const problems: string[] = [];
    if (m1.inFlight !== 0) problems.push(`in-flight gauge is ${m1.inFlight}, not 0`);
    if (socketGrowth > o.maxSocketGrowth) problems.push(`sockets grew by ${socketGrowth} since the cold start (> ${o.maxSocketGrowth})`);
    if (counted !== sent) problems.push(`requests_total counted ${counted}, sent ${sent}`);
    if (rssGrowth > o.maxRssGrowthMb * 1024) problems.push(`RSS grew by ${mb(rssGrowth)} (> ${o.maxRssGrowthMb} MB)`);
    if (heapGrowth > o.maxHeapGrowthMb * 1024 * 1024) problems.push(`heap after GC grew by ${mbBytes(heapGrowth)} (> ${o.maxHeapGrowthMb} MB)`);
    for (const [t, n] of Object.entries(handles1)) {
      const allowed = (handles0[t] ?? 0) + (t === 'TCPSocketWrap' ? o.maxSocketGrowth : 0);
      if (n > allowed) problems.push(`active ${t} handles: ${n} after, ${handles0[t] ?? 0} before`);
    }
    for (const [k, m] of outcomes) {
      for (const [x, n] of m) if (!EXPECTED[k].includes(x)) problems.push(`${k}: unexpected outcome ${x} ×${n}`);
    }
    if (spec.phase2) {
      if (!breakerSeen.has(2)) problems.push('the circuit breaker of the flaky target never opened during its outage');
      if ((m1.breaker.get('flaky') ?? 0) !== 0) problems.push('the circuit breaker of the flaky target did not close again after it recovered');
      if (((m1.attempts.get('flaky:success') ?? 0) - (m0.attempts.get('flaky:success') ?? 0)) === 0) problems.push('the flaky target served nothing after it recovered');
      if (rateLimited === 0 || (outcomes.get('limited')?.get('429') ?? 0) !== rateLimited) problems.push(`rate limiting: ${rateLimited} counted, ${outcomes.get('limited')?.get('429') ?? 0} seen by the client`);
      if (cacheHits === 0) problems.push('no cache hits');
    }
    const figures: PhaseResult['figures'] = {
      sent,
      counted,
      inFlight: m1.inFlight,
      injected,
      durationMs: ms,
      rssKb: { cold: cold.rssKb, before: before.rssKb, peak: peakRss, after: after.rssKb },
      sockets: { cold: cold.sockets, before: before.sockets, peak: peakSockets, after: after.sockets },
      heapBytes: { before: heap0, after: heap1 },
      handles: { before: handles0, after: handles1 },
      outcomes: Object.fromEntries([...outcomes.entries()].map(([k, m]) => [k, Object.fromEntries(m)])),
    };
    if (spec.phase2) {
      figures.breakerStatesSeen = [...breakerSeen].sort();
      figures.rateLimited = rateLimited;
      figures.cacheHits = cacheHits;
    }
    return { name: spec.name, rows, problems, figures };
  } finally {
    await control.close();
    await stopGateway(gw);
  }
}

export async function runSoak(options: Partial<SoakOptions> = {}): Promise<{ phases: PhaseResult[]; problems: string[] }> {
  const o: SoakOptions = { ...DEFAULTS, ...options };
  const up = await startFakeOpenAI();
  const anthropic: FakeAnthropic = await startFakeAnthropic();
  // the fakes record every request; keep their memory flat
  const trim = setInterval(() => {
    up.requests.length = 0;
    anthropic.requests.length = 0;
  }, 1000);
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-soak-'));
  const phases: PhaseResult[] = [];
  try {
    phases.push(await runPhase({ name: 'phase 1 (mixed traffic)', yaml: phase1Yaml(up.url, anthropic.url), mix: o.mix === 'basic' ? BASIC_MIX : FULL_MIX, requests: o.requests, phase2: false }, o, up, dir));
    if (o.phase2 > 0) {
      phases.push(await runPhase({ name: 'phase 2 (breaker, cache, limits)', yaml: phase2Yaml(up.url), mix: PHASE2_MIX, requests: o.phase2, phase2: true }, o, up, dir));
    }
  } finally {
    clearInterval(trim);
    await up.close();
    await anthropic.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return { phases, problems: phases.flatMap((p) => p.problems.map((x) => `${p.name}: ${x}`)) };
}

export function table(rows: Array<[string, string]>): string {
  const all: Array<[string, string]> = [['measure', 'value'], ['---', '---'], ...rows];
  const w = Math.max(...all.map(([k]) => k.length));
  return all.map(([k, v]) => `| ${k.padEnd(w)} | ${v} |`).join('\n');
}

async function main(): Promise<void> {
  const { values: a } = parseArgs({
    options: {
      requests: { type: 'string', default: String(DEFAULTS.requests) },
      concurrency: { type: 'string', default: String(DEFAULTS.concurrency) },
      warmup: { type: 'string', default: String(DEFAULTS.warmup) },
      seed: { type: 'string', default: String(DEFAULTS.seed) },
      mix: { type: 'string', default: DEFAULTS.mix },
      phase2: { type: 'string' },
      'max-socket-growth': { type: 'string', default: String(DEFAULTS.maxSocketGrowth) },
      'max-rss-growth-mb': { type: 'string', default: String(DEFAULTS.maxRssGrowthMb) },
      'max-heap-growth-mb': { type: 'string', default: String(DEFAULTS.maxHeapGrowthMb) },
      'settle-ms': { type: 'string', default: String(DEFAULTS.settleMs) },
    },
  });
  const t0 = performance.now();
  const requests = Math.max(1, Number(a.requests));
  if (a.mix !== 'full' && a.mix !== 'basic') throw new Error('--mix is full or basic');
  const { phases, problems } = await runSoak({
    requests,
    concurrency: Math.max(1, Number(a.concurrency)),
    warmup: Math.max(0, Number(a.warmup)),
    seed: Number(a.seed),
    mix: a.mix,
    phase2: Math.max(0, Number(a.phase2 ?? Math.round(requests / 5))),
    settleMs: Number(a['settle-ms']),
    maxSocketGrowth: Number(a['max-socket-growth']),
    maxRssGrowthMb: Number(a['max-rss-growth-mb']),
    maxHeapGrowthMb: Number(a['max-heap-growth-mb']),
    log: (s) => void process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${s}\n`),
  });
  for (const p of phases) process.stdout.write(`\n### ${p.name}\n\n${table(p.rows)}\n`);
  if (problems.length > 0) {
    process.stdout.write(`\nFAIL\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
    process.exitCode = 1;
  } else process.stdout.write('\nPASS\n');
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain) {
  main().catch((err: unknown) => {
    process.stderr.write(`soak failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
