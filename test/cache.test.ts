/**
 * The response cache and request coalescing end to end, through the official OpenAI SDK against a
 * fake upstream that counts what it receives: hit/miss/bypass headers and `age`, tenant isolation,
 * Cache-Control, streamed answers replayed as SSE, hits that cost nothing against limits, errors
 * never cached, and N concurrent identical requests sharing one upstream call.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import type { TestGateway } from './support/gateway.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const A = 'sk-gw-tenant-a-0001';
const B = 'sk-gw-tenant-b-0002';
const A2 = 'sk-gw-tenant-a2-0003'; // shares team A's cache namespace
const T = 'sk-gw-tokens-0004';

function config(upstream: string): string {
  return `
backends:
  up: { type: openai, base_url: "${upstream}", api_key: "sk-upstream" }
  demo: { type: fake, embedding_dimensions: 4 }
models:
  chat: { targets: [ { backend: up, model: gpt-4o-mini } ] }
  embed: { targets: [ { backend: demo, model: e } ] }
routing: { retry: { max_retries: 0 } }
cache: { enabled: true, ttl_seconds: 60 }
keys:
  - { name: a, key: "${A}", cache_namespace: team-a }
  - { name: a2, key: "${A2}", cache_namespace: team-a }
  - { name: b, key: "${B}" }
  - { name: t, key: "${T}", limits: { tpm: 10000, rpm: 1000 } }
`;
}

const client = (gw: TestGateway, key: string): OpenAI => new OpenAI({ baseURL: gw.baseURL, apiKey: key, maxRetries: 0 });
let n = 0;
/** A fresh question per test, so tests do not hit each other's entries. */
const fresh = (): string => `question ${++n} ${Date.now()}`;
const ask = (content: string, extra: Record<string, unknown> = {}) => ({ model: 'chat', temperature: 0, messages: [{ role: 'user' as const, content }], ...extra });
const askStream = (content: string, extra: Record<string, unknown> = {}) => ({ ...ask(content, extra), stream: true as const });

async function streamText(s: AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>): Promise<{ text: string; chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] }> {
  const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
  for await (const c of s) chunks.push(c);
  return { text: chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), chunks };
}

describe('response cache, end to end', () => {
  const ctx = upstreamsWithGateway({ upstreams: { up: {} }, yaml: ({ up }) => config(up.url), reset: 'beforeEach' });

  it('miss, then hit: same answer (same id), one upstream call, x-switchyard-cache and age', async () => {
    const c = client(ctx.gw, A);
    const q = fresh();
    const first = await c.chat.completions.create(ask(q)).withResponse();
    assert.equal(first.response.headers.get('x-switchyard-cache'), 'miss');
    assert.equal(first.response.headers.get('age'), null);
    const second = await c.chat.completions.create(ask(q)).withResponse();
    assert.equal(second.response.headers.get('x-switchyard-cache'), 'hit');
    assert.equal(second.response.headers.get('age'), '0');
    assert.equal(second.response.headers.get('x-switchyard-backend'), 'up');
    assert.equal(Number(second.response.headers.get('x-switchyard-cost-usd') ?? '0'), 0, 'a hit costs nothing');
    assert.deepEqual(second.data, first.data);
    assert.equal(ctx.up.requests.length, 1);
    // a parameter that can change the answer is a different entry
    await c.chat.completions.create(ask(q, { max_tokens: 5 }));
    await c.chat.completions.create(ask(q, { seed: 1 }));
    await c.chat.completions.create(ask(q, { tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }));
    assert.equal(ctx.up.requests.length, 4);
  });

  it('tenants never see each other\u2019s answers; keys sharing a cache_namespace do', async () => {
    const q = fresh();
    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'secret answer for A' });
    await client(ctx.gw, A).chat.completions.create(ask(q));
    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'answer for B' });
    const b = await client(ctx.gw, B).chat.completions.create(ask(q)).withResponse();
    assert.equal(b.response.headers.get('x-switchyard-cache'), 'miss');
    assert.equal(b.data.choices[0]?.message.content, 'answer for B');
    const a2 = await client(ctx.gw, A2).chat.completions.create(ask(q)).withResponse();
    assert.equal(a2.response.headers.get('x-switchyard-cache'), 'hit');
    assert.equal(a2.data.choices[0]?.message.content, 'secret answer for A');
    assert.equal(ctx.up.requests.length, 2);
  });

  it('temperature > 0 (or none) bypasses; Cache-Control no-store bypasses; no-cache refreshes', async () => {
    const c = client(ctx.gw, A);
    const q = fresh();
    const hot = await c.chat.completions.create(ask(q, { temperature: 0.8 })).withResponse();
    assert.equal(hot.response.headers.get('x-switchyard-cache'), 'bypass');
    await c.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: q }] });
    assert.equal(ctx.up.requests.length, 2);

    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'v1' });
    const noStore = await c.chat.completions.create(ask(q), { headers: { 'cache-control': 'no-store' } }).withResponse();
    assert.equal(noStore.response.headers.get('x-switchyard-cache'), 'bypass');
    const miss = await c.chat.completions.create(ask(q)).withResponse();
    assert.equal(miss.response.headers.get('x-switchyard-cache'), 'miss', 'no-store did not store');
    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'v2' });
    const refreshed = await c.chat.completions.create(ask(q), { headers: { 'cache-control': 'no-cache' } }).withResponse();
    assert.equal(refreshed.response.headers.get('x-switchyard-cache'), 'miss');
    assert.equal(refreshed.data.choices[0]?.message.content, 'v2');
    const hit = await c.chat.completions.create(ask(q)).withResponse();
    assert.equal(hit.response.headers.get('x-switchyard-cache'), 'hit');
    assert.equal(hit.data.choices[0]?.message.content, 'v2', 'the refresh replaced the entry');
    assert.equal(ctx.up.requests.length, 5);
  });

  it('errors are not cached', async () => {
    const c = client(ctx.gw, A);
    const q = fresh();
    ctx.up.onModel('gpt-4o-mini', { kind: 'error', status: 400, message: 'nope' });
    await assert.rejects(c.chat.completions.create(ask(q)), (e: unknown) => e instanceof OpenAI.APIError && e.status === 400);
    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'fine now' });
    const r = await c.chat.completions.create(ask(q)).withResponse();
    assert.equal(r.response.headers.get('x-switchyard-cache'), 'miss');
    assert.equal(ctx.up.requests.length, 2);
  });

  it('a streamed answer is cached and a hit is replayed as SSE, usage chunk only when asked', async () => {
    const c = client(ctx.gw, A);
    const q = fresh();
    ctx.up.onModel('gpt-4o-mini', { kind: 'stream', chunks: ['Hello ', 'streamed ', 'world'] });
    const first = await c.chat.completions.create(askStream(q)).withResponse();
    assert.equal(first.response.headers.get('x-switchyard-cache'), 'miss');
    const a = await streamText(first.data);
    assert.equal(a.text, 'Hello streamed world');
    const second = await c.chat.completions.create(askStream(q, { stream_options: { include_usage: true } })).withResponse();
    assert.equal(second.response.headers.get('x-switchyard-cache'), 'hit');
    assert.match(second.response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const b = await streamText(second.data);
    assert.equal(b.text, a.text);
    assert.equal(b.chunks[0]?.id, a.chunks[0]?.id, 'the original id is kept');
    assert.ok(b.chunks.at(-1)?.usage, 'asked for usage: the usage chunk is replayed');
    assert.equal(a.chunks.some((ch) => ch.usage), false, 'not asked: no usage chunk');
    assert.equal(ctx.up.requests.length, 1);
    // a non-streamed request is a different entry
    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'Hello streamed world' });
    await c.chat.completions.create(ask(q));
    assert.equal(ctx.up.requests.length, 2);
  });

  it('embeddings are cached per encoding_format', async () => {
    const c = client(ctx.gw, A);
    const input = fresh();
    const one = await c.embeddings.create({ model: 'embed', input }).withResponse();
    const two = await c.embeddings.create({ model: 'embed', input }).withResponse();
    assert.equal(one.response.headers.get('x-switchyard-cache'), 'miss');
    assert.equal(two.response.headers.get('x-switchyard-cache'), 'hit');
    assert.deepEqual(two.data.data[0]?.embedding, one.data.data[0]?.embedding);
    const asFloat = await c.embeddings.create({ model: 'embed', input, encoding_format: 'float' }).withResponse();
    assert.equal(asFloat.response.headers.get('x-switchyard-cache'), 'miss');
    assert.deepEqual(asFloat.data.data[0]?.embedding, one.data.data[0]?.embedding);
  });

  it('cache hits cost nothing against token limits (they still count as requests)', async () => {
    const c = client(ctx.gw, T);
    const q = fresh();
    const miss = await c.chat.completions.create(ask(q, { max_tokens: 3000 })).withResponse();
    const afterMiss = Number(miss.response.headers.get('x-ratelimit-remaining-tokens'));
    await new Promise((r) => setTimeout(r, 50));
    const hits = [];
    for (let i = 0; i < 5; i++) hits.push(await c.chat.completions.create(ask(q, { max_tokens: 3000 })).withResponse());
    for (const h of hits) {
      assert.equal(h.response.headers.get('x-switchyard-cache'), 'hit');
      // without reconciliation of the miss and with hits charged, 5 × 3000 would not fit in 10000
      assert.ok(Number(h.response.headers.get('x-ratelimit-remaining-tokens')) >= afterMiss);
    }
    const rq = hits.map((h) => Number(h.response.headers.get('x-ratelimit-remaining-requests')));
    assert.ok((rq[0] ?? 0) > (rq[4] ?? 0), 'hits count against rpm');
  });
});

describe('request coalescing, end to end', () => {
  const ctx = upstreamsWithGateway({ upstreams: { up: {} }, yaml: ({ up }) => config(up.url), reset: 'beforeEach' });

  it('N concurrent identical requests → one upstream call, everyone gets the answer', async () => {
    const c = client(ctx.gw, A);
    const q = fresh();
    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'shared answer', delayMs: 300 });
    const all = await Promise.all(Array.from({ length: 6 }, () => c.chat.completions.create(ask(q)).withResponse()));
    assert.equal(ctx.up.requests.length, 1);
    for (const r of all) assert.equal(r.data.choices[0]?.message.content, 'shared answer');
    const states = all.map((r) => r.response.headers.get('x-switchyard-cache')).sort();
    assert.deepEqual(states, ['hit', 'hit', 'hit', 'hit', 'hit', 'miss']);
    assert.equal(all.filter((r) => r.response.headers.get('x-switchyard-coalesced') === 'true').length, 5);
  });

  it('never across tenants: the same request from two namespaces makes two calls', async () => {
    const q = fresh();
    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'x', delayMs: 200 });
    await Promise.all([client(ctx.gw, A).chat.completions.create(ask(q)), client(ctx.gw, B).chat.completions.create(ask(q))]);
    assert.equal(ctx.up.requests.length, 2);
  });

  it('streams: concurrent identical streams share one upstream stream; late joiners get every chunk', async () => {
    const c = client(ctx.gw, A);
    const q = fresh();
    ctx.up.onModel('gpt-4o-mini', { kind: 'stream', chunks: ['one ', 'two ', 'three ', 'four'], delayMs: 80 });
    const first = c.chat.completions.create(askStream(q));
    await new Promise((r) => setTimeout(r, 120)); // the first chunks are out when the others join
    const others = Array.from({ length: 3 }, () => c.chat.completions.create(askStream(q)));
    const texts = await Promise.all([first, ...others].map(async (p) => (await streamText(await p)).text));
    assert.deepEqual(texts, Array(4).fill('one two three four'));
    assert.equal(ctx.up.requests.length, 1);
  });

  it('the leader disconnecting does not cut the followers off (the upstream call goes on)', async () => {
    const c = client(ctx.gw, A);
    const q = fresh();
    ctx.up.onModel('gpt-4o-mini', { kind: 'stream', chunks: ['a ', 'b ', 'c ', 'd ', 'e'], delayMs: 80 });
    const ac = new AbortController();
    const leader = await c.chat.completions.create(askStream(q), { signal: ac.signal });
    const follower = c.chat.completions.create(askStream(q));
    const it = leader[Symbol.asyncIterator]();
    await it.next();
    await new Promise((r) => setTimeout(r, 50));
    ac.abort();
    const text = (await streamText(await follower)).text;
    assert.equal(text, 'a b c d e');
    assert.equal(ctx.up.requests.length, 1);
    assert.equal(ctx.up.clientAborts, 0, 'the upstream call was not aborted');
  });

  it('…and when nobody is listening any more, the upstream call is aborted', async () => {
    const c = client(ctx.gw, A);
    const q = fresh();
    ctx.up.onModel('gpt-4o-mini', { kind: 'stream', chunks: ['a ', 'b ', 'c ', 'd ', 'e ', 'f'], delayMs: 150 });
    const ac1 = new AbortController();
    const ac2 = new AbortController();
    const s1 = await c.chat.completions.create(askStream(q), { signal: ac1.signal });
    const s2 = await c.chat.completions.create(askStream(q), { signal: ac2.signal });
    await s1[Symbol.asyncIterator]().next();
    await s2[Symbol.asyncIterator]().next();
    ac1.abort();
    ac2.abort();
    await ctx.up.waitForClientAbort();
    assert.equal(ctx.up.requests.length, 1);
    // an aborted call is not cached: the next identical request goes upstream again
    ctx.up.onModel('gpt-4o-mini', { kind: 'stream', chunks: ['fresh'] });
    const again = await c.chat.completions.create(askStream(q)).withResponse();
    assert.equal(again.response.headers.get('x-switchyard-cache'), 'miss');
    assert.equal((await streamText(again.data)).text, 'fresh');
  });
});
