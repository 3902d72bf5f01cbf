/**
 * `node --import tsx bench/cache-limits.ts`: what the limits and the cache cost per request.
 *   1. Tokenizer: the main thread's wait for a prompt count (worker round trip), for a typical chat
 *      prompt, a 20 KB one, and a conversation resending its history (memoised per message).
 *   2. Latency through an in-process gateway, sequential requests, p50/p99: a cache miss against a
 *      zero-latency fake upstream, the same with a tpm-limited key (count + reserve + reconcile),
 *      and a cache hit.
 */
import { performance } from 'node:perf_hooks';
import OpenAI from 'openai';
import { TokenCounter } from '../src/limits/tokens.ts';
import { startFakeOpenAI } from '../test/support/fake-openai-upstream.ts';
import { startGateway } from '../test/support/gateway.ts';

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
};
const fmt = (ms: number): string => `${ms.toFixed(3)} ms`;

async function time(n: number, f: (i: number) => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await f(i);
    out.push(performance.now() - t0);
  }
  return out;
}

const tc = new TokenCounter();
let t0 = performance.now();
await tc.warm(['cl100k_base']);
console.log(`encoder build (cl100k_base, in the worker): ${fmt(performance.now() - t0)}`);
t0 = performance.now();
await tc.warm(['o200k_base']);
console.log(`encoder build (o200k_base, in the worker): ${fmt(performance.now() - t0)}`);
const chat = 'Can you help me write a TypeScript function that parses ISO dates and returns the weekday? Please keep it short and explain the edge cases. ';
const typical = await time(500, (i) => tc.count('o200k_base', [`You are a helpful assistant. ${i}`, chat + i]));
console.log(`count, typical chat prompt (~300 chars, new each time): p50 ${fmt(pct(typical, 50))} p99 ${fmt(pct(typical, 99))}`);
const big = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(350);
const bigT = await time(50, (i) => tc.count('o200k_base', [big + i]));
console.log(`count, 20 KB prompt (new each time): p50 ${fmt(pct(bigT, 50))} p99 ${fmt(pct(bigT, 99))}`);
const history = Array.from({ length: 20 }, (_, i) => `${chat} turn ${i} ${big.slice(0, 800)}`);
await tc.count('o200k_base', history);
const conv = await time(200, (i) => tc.count('o200k_base', [...history, `new message ${i}`]));
console.log(`count, 20-turn conversation (~19 KB) with one new message: p50 ${fmt(pct(conv, 50))} p99 ${fmt(pct(conv, 99))}`);
await tc.close();

const up = await startFakeOpenAI();
const gw = await startGateway(
  `
backends: { up: { type: openai, base_url: "${up.url}", api_key: "k" } }
models: { chat: { targets: [ { backend: up, model: gpt-4o-mini } ] } }
cache: { enabled: true }
keys:
  - { name: plain, key: "sk-bench-plain-1" }
  - { name: limited, key: "sk-bench-limited-1", limits: { rpm: 1000000, tpm: 1000000000, max_concurrent: 100 } }
logging: { level: silent }
`,
);
const plain = new OpenAI({ baseURL: gw.baseURL, apiKey: 'sk-bench-plain-1', maxRetries: 0 });
const limited = new OpenAI({ baseURL: gw.baseURL, apiKey: 'sk-bench-limited-1', maxRetries: 0 });
const body = (content: string) => ({ model: 'chat', temperature: 0, messages: [{ role: 'user' as const, content }] });
await time(200, (i) => plain.chat.completions.create(body(`warm ${i}`)));
const miss = await time(500, (i) => plain.chat.completions.create(body(`${chat} miss ${i}`)));
const missLimited = await time(500, (i) => limited.chat.completions.create(body(`${chat} limited ${i}`)));
await plain.chat.completions.create(body(chat));
const hit = await time(500, () => plain.chat.completions.create(body(chat)));
const hitLimited = await time(500, () => limited.chat.completions.create(body(`${chat} limited 1`)));
console.log(`miss (zero-latency upstream):        p50 ${fmt(pct(miss, 50))} p99 ${fmt(pct(miss, 99))}`);
console.log(`miss, tpm+rpm+concurrency key:       p50 ${fmt(pct(missLimited, 50))} p99 ${fmt(pct(missLimited, 99))}`);
console.log(`hit:                                 p50 ${fmt(pct(hit, 50))} p99 ${fmt(pct(hit, 99))}`);
console.log(`hit, limited key:                    p50 ${fmt(pct(hitLimited, 50))} p99 ${fmt(pct(hitLimited, 99))}`);
console.log(`upstream requests: ${up.requests.length}`);
await gw.close();
await up.close();
