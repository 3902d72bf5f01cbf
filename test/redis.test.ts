/**
 * Shared state across replicas, for real: a `redis-server` on a free loopback port and TWO gateway
 * processes (`node --import tsx src/main.ts`) against it.
 *   - a key's limit of N requests per minute admits N in total across both, not 2N;
 *   - an answer cached by one is served by the other;
 *   - Redis killed mid-test: both keep serving (on_unavailable: open) and /ready says "degraded";
 *     Redis back: they recover by themselves and share state again.
 * Plus `on_unavailable: closed` against a Redis that is not there (in-process, no server needed).
 * In CI (CI set) a missing redis-server is a failure, never a skip.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { startFakeOpenAI } from './support/fake-openai-upstream.ts';
import type { GatewayProcess } from './support/gateway-process.ts';
import { startRedisPair, type RedisPair } from './support/redis-pair.ts';
import { startGateway } from './support/gateway.ts';
import { MemoryStore } from '../src/state/store/memory.ts';
import { RedisStore } from '../src/state/store/redis.ts';
import type { StateStore } from '../src/state/store/contract.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { RedisServer, redisSkip, until } from './support/redis-server.ts';
import { freePort } from './support/net.ts';

const skip = redisSkip;

const KEY = 'sk-gw-shared-limits-001';
const FREE = 'sk-gw-shared-free-002';
const OTHER = 'sk-gw-shared-other-003';

async function ready(p: GatewayProcess): Promise<{ status: number; body: { state?: { state: string; detail?: string } } }> {
  const r = await fetch(`${p.url}/ready`);
  return { status: r.status, body: (await r.json()) as { state?: { state: string; detail?: string } } };
}

const client = (p: GatewayProcess, key: string): OpenAI => new OpenAI({ baseURL: `${p.url}/v1`, apiKey: key, maxRetries: 0 });
const ask = (content: string) => ({ model: 'chat', temperature: 0, messages: [{ role: 'user' as const, content }] });

describe('shared state through Redis: two gateway processes', { skip }, () => {
  let pair: RedisPair | undefined;
  let g1: GatewayProcess | undefined;
  let g2: GatewayProcess | undefined;

  before(async () => {
    pair = await startRedisPair(
      'redis',
      (up, redisUrl) => `
backends:
  up: { type: openai, base_url: "${up.url}", api_key: "sk-upstream" }
models:
  chat: { targets: [ { backend: up, model: gpt-4o-mini } ] }
routing: { retry: { max_retries: 0 } }
keys:
  - { name: limited, key: "${KEY}", limits: { rpm: 3 } }
  - { name: free, key: "${FREE}", cache_namespace: shared-test }
  - { name: other, key: "${OTHER}" }
cache: { enabled: true, ttl_seconds: 120 }
state: { store: redis, url: "${redisUrl}", key_prefix: "sy-test-${process.pid}:", on_unavailable: open, command_timeout_ms: 300 }
`,
    );
    ({ a: g1, b: g2 } = pair);
  });

  after(async () => {
    await pair?.stop();
  });

  it('both report the shared store as ok', async () => {
    for (const g of [g1, g2]) {
      const r = await ready(g as GatewayProcess);
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.state, { store: 'redis', state: 'ok' });
    }
  });

  it('rpm: 3 is admitted N times in total across both replicas, not 2N', async () => {
    const started = Date.now();
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const g = (i % 2 === 0 ? g1 : g2) as GatewayProcess;
      try {
        await client(g, KEY).chat.completions.create(ask(`rpm ${i}`));
        statuses.push(200);
      } catch (err) {
        assert.ok(err instanceof OpenAI.APIError, String(err));
        statuses.push(err.status ?? 0);
      }
    }
    const elapsed = Date.now() - started;
    // GCRA refills one request every 20 s at rpm 3: allow for it on a very slow machine
    const refilled = Math.floor(elapsed / 20_000);
    const admitted = statuses.filter((s) => s === 200).length;
    assert.ok(admitted >= 3 && admitted <= 3 + refilled, `admitted ${admitted} in ${elapsed} ms: ${statuses.join(',')}`);
    assert.ok(statuses.slice(admitted).every((s) => s === 429) || refilled > 0, statuses.join(','));
    assert.ok(statuses.filter((s, i) => s === 200 && i % 2 === 1).length >= 1, 'both replicas admitted some');
  });

  it('an answer cached by one replica is served by the other', async () => {
    const up = (pair as RedisPair).up;
    const before = up.requests.length;
    const q = `cached across replicas ${Date.now()}`;
    const a = await client(g1 as GatewayProcess, FREE).chat.completions.create(ask(q)).withResponse();
    assert.equal(a.response.headers.get('x-switchyard-cache'), 'miss');
    await until('the entry is in redis', async () => {
      const b = await client(g2 as GatewayProcess, FREE).chat.completions.create(ask(q)).withResponse();
      return b.response.headers.get('x-switchyard-cache') === 'hit' && JSON.stringify(b.data) === JSON.stringify(a.data);
    });
    assert.equal(up.requests.length - before, 1);
  });

  it('item_reference: an item stored by one replica resolves on the other, for its key only, until DELETE', async () => {
    const first = await client(g1 as GatewayProcess, FREE).responses.create({ model: 'chat', input: `remember this ${Date.now()}` });
    const item = first.output[0];
    assert.ok(item?.type === 'message');
    const up = (pair as RedisPair).up;
    const before = up.requests.length;
    const second = await client(g2 as GatewayProcess, FREE).responses.create({
      model: 'chat',
      store: false,
      input: [{ type: 'item_reference', id: item.id }, { role: 'user', content: 'repeat it' }],
    });
    assert.equal(second.status, 'completed');
    const sent = up.requests.slice(before).find((r) => r.path === '/v1/chat/completions')?.body as { messages?: unknown };
    assert.deepEqual(sent?.messages, [
      { role: 'assistant', content: first.output_text },
      { role: 'user', content: 'repeat it' },
    ]);
    const refer = (g: GatewayProcess, key: string) => client(g, key).responses.create({ model: 'chat', input: [{ type: 'item_reference', id: item.id }] });
    await assert.rejects(refer(g2 as GatewayProcess, OTHER), (e: unknown) => e instanceof OpenAI.NotFoundError && e.param === 'input' && e.message.includes(item.id));
    await client(g2 as GatewayProcess, FREE).responses.delete(first.id);
    await assert.rejects(refer(g1 as GatewayProcess, FREE), (e: unknown) => e instanceof OpenAI.NotFoundError && e.param === 'input');
  });

  it('Redis dies: both keep serving from local state and /ready says degraded (200); Redis returns: they recover', async () => {
    await (pair as RedisPair).redis.stop();
    for (const g of [g1, g2] as GatewayProcess[]) {
      await until('degraded is noticed', async () => (await ready(g)).body.state?.state === 'degraded');
      const r = await ready(g);
      assert.equal(r.status, 200, 'a Redis blip does not pull the replica out of the load balancer');
      assert.match(r.body.state?.detail ?? '', /serving with local limits and cache/);
      const res = await client(g, FREE).chat.completions.create(ask(`during the outage ${Date.now()}`)).withResponse();
      assert.equal(res.response.status, 200);
      // log lines leave in batches (up to 20 ms later)
      await until('the outage is logged', async () => g.output().includes('"msg":"state store unavailable"'));
    }
    // limited keys are served too (local limits: fail open)
    const local = await client(g1 as GatewayProcess, FREE).chat.completions.create(ask('again'));
    assert.ok(local.choices[0]);

    await (pair as RedisPair).redis.launch();
    for (const g of [g1, g2] as GatewayProcess[]) {
      await until('recovered', async () => (await ready(g)).body.state?.state === 'ok', 20_000);
      await until('the recovery is logged', async () => g.output().includes('"msg":"state store recovered"'));
    }
    // shared again: an answer cached by one is served by the other
    const q = `after recovery ${Date.now()}`;
    await client(g2 as GatewayProcess, FREE).chat.completions.create(ask(q));
    await until('shared cache after recovery', async () => {
      const b = await client(g1 as GatewayProcess, FREE).chat.completions.create(ask(q)).withResponse();
      return b.response.headers.get('x-switchyard-cache') === 'hit';
    });
  });
});

describe('state.on_unavailable: closed, Redis not there', () => {
  it('keys with limits get 503 state_unavailable, keys without are served, /ready is 503', async () => {
    const up = await startFakeOpenAI();
    const port = await freePort(); // nothing listens there
    const gw = await startGateway(`
backends:
  up: { type: openai, base_url: "${up.url}", api_key: "sk-upstream" }
models:
  chat: { targets: [ { backend: up, model: gpt-4o-mini } ] }
keys:
  - { name: limited, key: "${KEY}", limits: { rpm: 100 } }
  - { name: free, key: "${FREE}" }
cache: { enabled: true }
state: { store: redis, url: "redis://127.0.0.1:${port}", on_unavailable: closed, command_timeout_ms: 200 }
`);
    try {
      const e = await client({ url: gw.url } as GatewayProcess, KEY)
        .chat.completions.create(ask('x'))
        .then(
          () => assert.fail('expected 503'),
          (err: unknown) => err,
        );
      assert.ok(e instanceof OpenAI.APIError);
      assert.equal(e.status, 503);
      assert.equal(e.code, 'state_unavailable');
      assert.ok(Number(e.headers?.get('retry-after')) > 0);
      const ok = await client({ url: gw.url } as GatewayProcess, FREE).chat.completions.create(ask('y')).withResponse();
      assert.equal(ok.response.status, 200);
      assert.equal(ok.response.headers.get('x-switchyard-cache'), 'miss', 'no shared cache: nothing is stored locally either');
      const again = await client({ url: gw.url } as GatewayProcess, FREE).chat.completions.create(ask('y')).withResponse();
      assert.equal(again.response.headers.get('x-switchyard-cache'), 'miss');
      const r = await fetch(`${gw.url}/ready`);
      assert.equal(r.status, 503);
      const body = (await r.json()) as { error: { code: string } };
      assert.equal(body.error.code, 'state_unavailable');
      assert.ok(gw.logs.some((l) => l.includes('"msg":"state store unavailable"')));
    } finally {
      await gw.close();
      await up.close();
    }
  });
});

/**
 * The Redis store's Lua scripts and the in-memory store must agree: the same scenarios against both
 * (no clock injection for Redis — it uses the server's TIME — so nothing here waits for a refill).
 */
function storeScenarios(name: string, make: () => Promise<{ store: StateStore; done: () => Promise<void> }>, skipIt: string | false): void {
  describe(`StateStore semantics: ${name}`, { skip: skipIt }, () => {
    let store: StateStore;
    let done: () => Promise<void>;
    let n = 0;
    const key = (): string => `k${process.pid}-${Date.now()}-${++n}`;
    before(async () => {
      ({ store, done } = await make());
    });
    after(async () => done?.());

    it('rpm: a burst of the limit, then refused with the time until one refills; refusals take nothing', async () => {
      const k = key();
      const rem: number[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await store.admit({ key: k, rpm: 3, tokens: 0, countRequest: true });
        assert.equal(r.allowed, true);
        rem.push(r.requests?.remaining ?? -1);
      }
      assert.deepEqual(rem, [2, 1, 0]);
      const no = await store.admit({ key: k, rpm: 3, tokens: 0, countRequest: true });
      assert.equal(no.allowed, false);
      assert.equal(no.refused, 'requests');
      assert.ok(no.retryAfterMs > 19_000 && no.retryAfterMs <= 20_000, String(no.retryAfterMs));
      assert.equal(no.requests?.remaining, 0);
      // a request refused for tokens does not consume its rpm unit
      const k2 = key();
      const t = await store.admit({ key: k2, rpm: 2, tpm: 100, tokens: 200, countRequest: true });
      assert.equal(t.allowed, false);
      assert.equal(t.refused, 'tokens');
      assert.equal(t.retryAfterMs, Number.POSITIVE_INFINITY);
      assert.equal(t.requests?.remaining, 2);
      const t2 = await store.admit({ key: k2, rpm: 2, tpm: 100, tokens: 50, countRequest: true });
      assert.equal(t2.requests?.remaining, 1);
      assert.equal(t2.tokens?.remaining, 50);
    });

    it('tpm: reserve, refuse what does not fit, reconcile (refund and charge)', async () => {
      const k = key();
      const a = await store.admit({ key: k, tpm: 1000, tokens: 600, countRequest: true });
      assert.equal(a.allowed, true);
      assert.equal(a.tokens?.remaining, 400);
      const b = await store.admit({ key: k, tpm: 1000, tokens: 600, countRequest: true });
      assert.equal(b.allowed, false);
      assert.equal(b.tokens?.remaining, 400);
      assert.ok(b.retryAfterMs > 11_000 && b.retryAfterMs <= 12_000, String(b.retryAfterMs));
      assert.ok(a.ticket);
      await store.settle(a.ticket, -450); // used 150
      const c = await store.admit({ key: k, tpm: 1000, tokens: 600, countRequest: true });
      assert.equal(c.allowed, true);
      assert.ok((c.tokens?.remaining ?? 0) >= 250 && (c.tokens?.remaining ?? 0) < 260, String(c.tokens?.remaining));
      assert.ok(c.ticket);
      await store.settle(c.ticket, 300); // used 900 of 600 reserved
      const d = await store.admit({ key: k, tpm: 1000, tokens: 0, countRequest: false });
      assert.ok((d.tokens?.remaining ?? 99) < 10, String(d.tokens?.remaining));
    });

    it('concurrency: leases up to the maximum, released once', async () => {
      const k = key();
      const a = await store.admit({ key: k, tokens: 0, countRequest: true, maxConcurrent: 2 });
      const b = await store.admit({ key: k, tokens: 0, countRequest: true, maxConcurrent: 2 });
      assert.ok(a.ticket?.leaseId && b.ticket?.leaseId);
      const c = await store.admit({ key: k, tokens: 0, countRequest: true, maxConcurrent: 2 });
      assert.equal(c.allowed, false);
      assert.equal(c.refused, 'concurrency');
      await store.release(a.ticket);
      await store.refresh([b.ticket]);
      const d = await store.admit({ key: k, tokens: 0, countRequest: true, maxConcurrent: 2 });
      assert.equal(d.allowed, true);
      const e = await store.admit({ key: k, tokens: 0, countRequest: true, maxConcurrent: 2 });
      assert.equal(e.allowed, false);
    });

    it('budget: spend accumulates per period; at the budget, refused', async () => {
      const k = key();
      const a = await store.admit({ key: k, tokens: 0, countRequest: true, budgetNano: 10_000, period: 'd2026-11-30' });
      assert.equal(a.allowed, true);
      assert.equal(a.spentNano, 0);
      assert.ok(a.ticket);
      await store.settle(a.ticket, 0, { period: 'd2026-11-30', nano: 6_000, ttlMs: 60_000 });
      await store.settle(a.ticket, 0, { period: 'd2026-11-30', nano: 4_000, ttlMs: 60_000 });
      const b = await store.admit({ key: k, tokens: 0, countRequest: true, budgetNano: 10_000, period: 'd2026-11-30' });
      assert.equal(b.allowed, false);
      assert.equal(b.refused, 'budget');
      assert.equal(b.spentNano, 10_000);
      // another period starts from zero
      const c = await store.admit({ key: k, tokens: 0, countRequest: true, budgetNano: 10_000, period: 'd2026-12-01' });
      assert.equal(c.allowed, true);
    });

    it('cache entries: set with a TTL, get', async () => {
      const k = key();
      assert.equal(await store.cacheGet(k), undefined);
      await store.cacheSet(k, '{"x":1}', 60_000);
      assert.equal(await store.cacheGet(k), '{"x":1}');
    });
  });
}

storeScenarios('memory', async () => {
  const store = new MemoryStore({ maxEntries: 100, maxBytes: 1e6 });
  return { store, done: () => store.close() };
}, false);

storeScenarios(
  'redis (Lua)',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-redis-store-'));
    const server = await RedisServer.start(dir);
    const store = new RedisStore({
      url: `redis://127.0.0.1:${server.port}`,
      keyPrefix: 'sy-store-test:',
      onUnavailable: 'closed',
      commandTimeoutMs: 1000,
      maxEntries: 100,
      maxBytes: 1e6,
      logger: createLogger('silent'),
    });
    assert.equal(await store.ready(5000), true);
    return {
      store,
      done: async () => {
        await store.close();
        await server.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  skip,
);
