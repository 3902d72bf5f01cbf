/**
 * Per-key limits end to end, through the official OpenAI SDK: 429s with the right headers and
 * messages, token reservations reconciled with real usage (streams included), concurrency released
 * on success, error and client abort, budgets, allowed models and key_sha256. A refused request
 * never reaches the upstream (the fake upstream counts what it receives).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import OpenAI from 'openai';
import type { TestGateway } from './support/gateway.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const KEYS = {
  rpm: 'sk-gw-rpm-key-0001',
  tpm: 'sk-gw-tpm-key-0002',
  conc: 'sk-gw-conc-key-0003',
  budget: 'sk-gw-budget-key-0004',
  only: 'sk-gw-only-key-0005',
  hashed: 'sk-gw-hashed-key-0006',
  free: 'sk-gw-free-key-0007',
};
const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

function config(upstream: string): string {
  return `
backends:
  up: { type: openai, base_url: "${upstream}", api_key: "sk-upstream" }
models:
  chat: { targets: [ { backend: up, model: gpt-4o-mini, price: { input: 1000, output: 1000 } } ] }
  rpm-chat: { targets: [ { backend: up, model: gpt-4o-mini } ] }
  tpm-chat: { targets: [ { backend: up, model: gpt-4o-mini } ] }
  conc-chat: { targets: [ { backend: up, model: gpt-4o-mini } ] }
  other: { targets: [ { backend: up, model: gpt-4o } ] }
routing: { retry: { max_retries: 0 } }
limits: { default_max_tokens: 100 }
keys:
  - { name: rpm, key: "${KEYS.rpm}", limits: { rpm: 2 } }
  - { name: tpm, key: "${KEYS.tpm}", limits: { tpm: 1000 } }
  - { name: conc, key: "${KEYS.conc}", limits: { max_concurrent: 1 } }
  - { name: budget, key: "${KEYS.budget}", limits: { budget_usd: 0.05, budget_period: day } }
  - { name: only, key: "${KEYS.only}", models: [ chat ] }
  - { name: hashed, key_sha256: "${sha(KEYS.hashed)}", limits: { rpm: 100, tpm: 100000 } }
  - { name: free, key: "${KEYS.free}" }
`;
}

const client = (gw: TestGateway, key: string): OpenAI => new OpenAI({ baseURL: gw.baseURL, apiKey: key, maxRetries: 0 });
const ask = (model: string, extra: Record<string, unknown> = {}) => ({ model, messages: [{ role: 'user' as const, content: 'hello there' }], ...extra });
const askStream = (model: string, extra: Record<string, unknown> = {}) => ({ ...ask(model, extra), stream: true as const });

async function apiError(p: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, String(err));
    return err;
  }
  assert.fail('expected an APIError');
}

/** Waits (bounded) until `f` holds: releases happen when the server notices, not at a fixed time. */
async function eventually(f: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await f()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`never happened: ${what}`);
}

describe('per-key limits, end to end', () => {
  const ctx = upstreamsWithGateway({ upstreams: { up: {} }, yaml: ({ up }) => config(up.url), reset: 'beforeEach' });

  it('rpm: N requests pass with x-ratelimit headers, the next gets 429 with retry-after and never reaches the upstream', async () => {
    const c = client(ctx.gw, KEYS.rpm);
    const first = await c.chat.completions.create(ask('rpm-chat')).withResponse();
    assert.equal(first.response.headers.get('x-ratelimit-limit-requests'), '2');
    assert.equal(first.response.headers.get('x-ratelimit-remaining-requests'), '1');
    assert.equal(first.response.headers.get('x-ratelimit-reset-requests'), '30s');
    assert.equal(first.response.headers.get('x-ratelimit-limit-tokens'), null, 'no tpm on this key');
    await c.chat.completions.create(ask('rpm-chat'));
    const e = await apiError(c.chat.completions.create(ask('rpm-chat')));
    assert.equal(e.status, 429);
    assert.ok(e instanceof OpenAI.RateLimitError);
    assert.equal(e.code, 'rate_limit_exceeded');
    assert.equal(e.type, 'rate_limit_error');
    assert.match(e.message, /requests per minute \(rpm\): Limit 2, Remaining 0/);
    const h = e.headers;
    assert.ok(h);
    const retryAfter = Number(h.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= 30, `retry-after ${retryAfter}`);
    assert.ok(Number(h.get('retry-after-ms')) > 0);
    assert.equal(h.get('x-ratelimit-remaining-requests'), '0');
    assert.equal(h.get('content-type'), 'application/json');
    assert.equal(ctx.up.requests.length, 2, 'the refused request did not reach the upstream');
  });

  it('a key without limits gets no x-ratelimit headers', async () => {
    const r = await client(ctx.gw, KEYS.free).chat.completions.create(ask('chat')).withResponse();
    assert.equal(r.response.headers.get('x-ratelimit-limit-requests'), null);
  });

  it('tpm: the reservation (prompt + max_tokens) is reconciled with the real usage', async () => {
    const c = client(ctx.gw, KEYS.tpm);
    // reserves ~12 prompt tokens + 600; the upstream reports 5 + 3
    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'one two three', usage: { prompt_tokens: 5, completion_tokens: 3 } });
    const a = await c.chat.completions.create(ask('tpm-chat', { max_tokens: 600 })).withResponse();
    const remainingAfterReserve = Number(a.response.headers.get('x-ratelimit-remaining-tokens'));
    assert.ok(remainingAfterReserve < 400 && remainingAfterReserve > 350, `remaining ${remainingAfterReserve}`);
    // without reconciliation this second reservation would not fit
    const b = await c.chat.completions.create(ask('tpm-chat', { max_tokens: 600 })).withResponse();
    assert.ok(Number(b.response.headers.get('x-ratelimit-remaining-tokens')) > 350);
    // a prompt + max_tokens larger than the whole tpm is refused for good
    const e = await apiError(c.chat.completions.create(ask('tpm-chat', { max_tokens: 5000 })));
    assert.equal(e.status, 429);
    assert.match(e.message, /Request too large for key 'tpm' on tokens per minute \(tpm\): Limit 1000/);
    assert.equal(e.headers?.get('x-should-retry'), 'false');
    assert.equal(ctx.up.requests.length, 2);
  });

  it('tpm: streams are reconciled from their usage chunk (the gateway asks for it even when the client does not)', async () => {
    const c = client(ctx.gw, KEYS.tpm);
    await new Promise((r) => setTimeout(r, 5)); // nothing else in flight for this key
    ctx.up.onModel('gpt-4o-mini', { kind: 'stream', chunks: ['a ', 'b'] });
    for (let i = 0; i < 3; i++) {
      const s = await c.chat.completions.create(askStream('tpm-chat', { max_tokens: 500 }));
      let text = '';
      for await (const ch of s) text += ch.choices[0]?.delta.content ?? '';
      assert.equal(text, 'a b');
      const sent = ctx.up.requests.at(-1)?.body as { stream_options?: { include_usage?: boolean } };
      assert.equal(sent.stream_options?.include_usage, true);
    }
  });

  it('concurrency: a second request while one is in flight gets 429; the lease is released at stream end', async () => {
    const c = client(ctx.gw, KEYS.conc);
    ctx.up.onModel('gpt-4o-mini', { kind: 'stream', chunks: ['slow ', 'stream ', 'here'], delayMs: 150 });
    const s = await c.chat.completions.create(askStream('conc-chat'));
    const e = await apiError(c.chat.completions.create(ask('conc-chat')));
    assert.equal(e.status, 429);
    assert.match(e.message, /concurrent requests \(max_concurrent\): Limit 1/);
    let text = '';
    for await (const ch of s) text += ch.choices[0]?.delta.content ?? '';
    assert.equal(text, 'slow stream here');
    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'ok' });
    await eventually(async () => {
      try {
        await c.chat.completions.create(ask('conc-chat'));
        return true;
      } catch {
        return false;
      }
    }, 'the lease was released at stream end');
  });

  it('concurrency: the lease is released when the client aborts, and when the upstream fails', async () => {
    const c = client(ctx.gw, KEYS.conc);
    ctx.up.onModel('gpt-4o-mini', { kind: 'stream', chunks: ['a ', 'b ', 'c ', 'd ', 'e'], delayMs: 400 });
    const ac = new AbortController();
    const s = await c.chat.completions.create(askStream('conc-chat'), { signal: ac.signal });
    const it = s[Symbol.asyncIterator]();
    await it.next();
    ac.abort();
    await ctx.up.waitForClientAbort();
    ctx.up.onModel('gpt-4o-mini', { kind: 'error', status: 400, message: 'bad thing' });
    await eventually(async () => {
      try {
        await c.chat.completions.create(ask('conc-chat'));
      } catch (err) {
        return err instanceof OpenAI.APIError && err.status === 400;
      }
      return false;
    }, 'the aborted stream released its lease');
    // the failed request released its lease too: the next one is not refused for concurrency
    const e = await apiError(c.chat.completions.create(ask('conc-chat')));
    assert.equal(e.status, 400);
  });

  it('budget: spend = usage × price; once spent, 429 budget_exceeded with x-should-retry: false', async () => {
    const c = client(ctx.gw, KEYS.budget);
    // price 1000 USD per 1M tokens both ways: 30 tokens = $0.03
    ctx.up.onModel('gpt-4o-mini', { kind: 'reply', content: 'x', usage: { prompt_tokens: 20, completion_tokens: 10 } });
    await c.chat.completions.create(ask('chat'));
    await c.chat.completions.create(ask('chat')); // $0.06 now: over the $0.05
    const e = await apiError(c.chat.completions.create(ask('chat')));
    assert.equal(e.status, 429);
    assert.equal(e.code, 'budget_exceeded');
    assert.equal(e.type, 'insufficient_quota');
    assert.match(e.message, /\$0\.0600 of its \$0\.05 daily budget/);
    assert.equal(e.headers?.get('x-should-retry'), 'false');
    const retryAfter = Number(e.headers?.get('retry-after'));
    assert.ok(retryAfter > 0 && retryAfter <= 86_400);
    assert.equal(ctx.up.requests.length, 2);
  });

  it('models: a key limited to some models gets 404 for the others, and /v1/models lists only its own', async () => {
    const c = client(ctx.gw, KEYS.only);
    await c.chat.completions.create(ask('chat'));
    const e = await apiError(c.chat.completions.create(ask('other')));
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    const list = await c.models.list();
    assert.deepEqual(
      list.data.map((m) => m.id),
      ['chat'],
    );
    const all = await client(ctx.gw, KEYS.free).models.list();
    assert.ok(all.data.length > 1);
  });

  it('key_sha256: the key is accepted although the config holds only its digest', async () => {
    const r = await client(ctx.gw, KEYS.hashed).chat.completions.create(ask('chat')).withResponse();
    assert.equal(r.response.status, 200);
    assert.equal(r.response.headers.get('x-ratelimit-limit-requests'), '100');
    assert.equal(r.response.headers.get('x-ratelimit-limit-tokens'), '100000');
    const e = await apiError(client(ctx.gw, sha(KEYS.hashed)).chat.completions.create(ask('chat')));
    assert.equal(e.status, 401, 'the digest itself is not a key');
  });

  it('the request log names the key and never contains it', async () => {
    await client(ctx.gw, KEYS.rpm).models.list();
    const text = ctx.gw.logs.join('');
    for (const k of Object.values(KEYS)) assert.ok(!text.includes(k));
  });
});
