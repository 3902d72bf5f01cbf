/**
 * The upstream call alone, in one process: what one request to an OpenAI-compatible upstream
 * costs the caller through the openai SDK (on undici's fetch with a pooled Agent, as
 * src/backends/upstream/openai-compatible.ts does) versus undici.request, for chat JSON, a 20-chunk stream and
 * 16×1536 float embeddings. A closed loop of `--concurrency` callers runs for `--seconds` per
 * case against the mock upstream (another process, on another core when taskset exists); the
 * caller's own CPU time per request (process.cpuUsage) is the number to compare.
 *
 *   node --import tsx bench/sdk-vs-undici.ts [--seconds 2] [--rounds 2] [--concurrency 64]
 *
 * Every case is warmed up first, then measured `--rounds` times, interleaved with the others;
 * the table keeps each case's best round (other load on the machine only ever slows a round).
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { Agent, fetch as undiciFetch, request } from 'undici';
import { CHAT_MODEL, EMBED_INPUTS, EMBED_MODEL, chatBody, embedFloatBody, streamBody } from './payloads.ts';
import { planPinning, startProc, stopProc } from './procs.ts';
import { spawnSync } from 'node:child_process';

const { values: a } = parseArgs({ options: { seconds: { type: 'string', default: '2' }, rounds: { type: 'string', default: '2' }, concurrency: { type: 'string', default: '64' } } });
const seconds = Number(a.seconds);
const rounds = Math.max(1, Number(a.rounds));
const concurrency = Number(a.concurrency);

type Fetch = NonNullable<ConstructorParameters<typeof OpenAI>[0]>['fetch'];
type Op = 'chat' | 'stream' | 'embed-float';

interface Outcome {
  rps: number;
  cpuUsPerReq: number;
  errors: number;
}

async function closedLoop(fn: () => Promise<void>, secs: number): Promise<Outcome> {
  let n = 0;
  let errors = 0;
  const t0 = performance.now();
  const until = t0 + secs * 1000;
  const cpu0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        try {
          await fn();
          n++;
        } catch {
          errors++;
        }
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return { rps: n / ((performance.now() - t0) / 1000), cpuUsPerReq: n ? (cpu.user + cpu.system) / n : Number.NaN, errors };
}

const BODIES: Record<Op, { path: string; body: string }> = {
  chat: { path: '/v1/chat/completions', body: chatBody },
  stream: { path: '/v1/chat/completions', body: streamBody },
  'embed-float': { path: '/v1/embeddings', body: embedFloatBody },
};

function cases(base: string, agent: Agent): Array<[string, (op: Op) => () => Promise<void>]> {
  const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-bench-not-a-real-key' };
  const client = new OpenAI({
    apiKey: 'sk-bench-not-a-real-key',
    baseURL: `${base}/v1`,
    maxRetries: 0,
    timeout: 60_000,
    fetch: undiciFetch as unknown as Fetch,
    fetchOptions: { dispatcher: agent } as NonNullable<ConstructorParameters<typeof OpenAI>[0]>['fetchOptions'],
    logLevel: 'off',
  });
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Say hello in one short sentence.' }];
  const inputs = Array.from({ length: EMBED_INPUTS }, (_, i) => `The quick brown fox number ${i} jumps over the lazy dog.`);
  const raw = (parse: 'bytes' | 'json' | 'events') => (op: Op) => async () => {
    const b = BODIES[op];
    const res = await request(`${base}${b.path}`, { method: 'POST', headers, body: b.body, dispatcher: agent });
    if (op === 'stream' && parse === 'events') {
      // what a gateway that inspects every chunk must do: split the events, parse each JSON
      let buf = '';
      for await (const c of res.body as AsyncIterable<Buffer>) {
        buf += c.toString('utf8');
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (ev.startsWith('data: ') && ev !== 'data: [DONE]') JSON.parse(ev.slice(6));
        }
      }
    } else if (parse === 'json' && op !== 'stream') await res.body.json();
    else await res.body.arrayBuffer();
    if (res.statusCode !== 200) throw new Error(String(res.statusCode));
  };
  const viaFetch = (f: typeof fetch | typeof undiciFetch, init: Record<string, unknown>) => (op: Op) => async () => {
    const b = BODIES[op];
    const res = await (f as typeof fetch)(`${base}${b.path}`, { method: 'POST', headers, body: b.body, ...init });
    if (op === 'stream') for await (const _c of res.body as unknown as AsyncIterable<Uint8Array>);
    else await res.json();
    if (res.status !== 200) throw new Error(String(res.status));
  };
  const sdk = (op: Op) => async () => {
    if (op === 'chat') await client.chat.completions.create({ model: CHAT_MODEL, messages, max_tokens: 32, temperature: 0 });
    else if (op === 'stream') for await (const _c of await client.chat.completions.create({ model: CHAT_MODEL, messages, max_tokens: 32, temperature: 0, stream: true }));
    else await client.embeddings.create({ model: EMBED_MODEL, input: inputs, encoding_format: 'float' });
  };
  return [
    ['undici.request, raw bytes', raw('bytes')],
    ['undici.request + JSON.parse (streams: per event)', raw('events')],
    ['undici.fetch + res.json()', viaFetch(undiciFetch, { dispatcher: agent })],
    ['global fetch + res.json()', viaFetch(fetch, {})],
    ['openai SDK (undici.fetch + Agent)', sdk],
  ];
}

async function main(): Promise<void> {
  const pin = planPinning();
  if (pin.enabled) spawnSync('taskset', ['-a', '-p', '-c', pin.proxyCore, String(process.pid)], { stdio: 'ignore' });
  const mock = await startProc({ name: 'mock upstream', args: ['--import', 'tsx', join(import.meta.dirname, 'mock-upstream.ts')], core: pin.enabled ? pin.loadCore : undefined });
  const agent = new Agent({ connections: 256, keepAliveTimeout: 30_000, headersTimeout: 0, bodyTimeout: 0 });
  const lines = [
    `Best of ${rounds} rounds. One process${pin.enabled ? ` on core ${pin.proxyCore} (mock upstream on core ${pin.loadCore})` : ' (not pinned)'}, ${concurrency} concurrent callers, ${seconds} s per case, Node.js ${process.version}.`,
    '',
    '| call path | chat req/s | chat CPU µs/req | stream req/s | stream CPU µs/req | embed float req/s | embed float CPU µs/req |',
    '|---|--:|--:|--:|--:|--:|--:|',
  ];
  const ops = ['chat', 'stream', 'embed-float'] as const;
  try {
    const all = cases(mock.url, agent).map(([name, make]) => ({ name, fns: ops.map((op) => make(op)), best: ops.map((): Outcome | undefined => undefined) }));
    for (const c of all) for (const fn of c.fns) await closedLoop(fn, 0.5);
    for (let r = 0; r < rounds; r++) {
      for (const c of all) {
        for (const [i, fn] of c.fns.entries()) {
          const o = await closedLoop(fn, seconds);
          process.stderr.write(`${c.name.padEnd(48)} ${String(ops[i]).padEnd(12)} ${Math.round(o.rps).toString().padStart(6)} req/s  ${Math.round(o.cpuUsPerReq)} µs/req  errors ${o.errors}\n`);
          const b = c.best[i];
          if (!b || o.cpuUsPerReq < b.cpuUsPerReq) c.best[i] = o;
        }
      }
    }
    const fmt = (v: number | undefined): string => (v === undefined || !Number.isFinite(v) ? '—' : Math.round(v).toLocaleString('en-US'));
    for (const c of all) lines.push(`| ${c.name} | ${c.best.map((o) => `${fmt(o?.rps)} | ${fmt(o?.cpuUsPerReq)}`).join(' | ')} |`);
  } finally {
    await agent.close();
    await stopProc(mock);
  }
  process.stdout.write(`\n${lines.join('\n')}\n`);
}

await main();
