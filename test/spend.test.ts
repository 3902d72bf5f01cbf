/**
 * Spend that lasts: every answered request through the gateway (chat, Messages and Responses, JSON
 * and stream, real SDKs) is a row of the spend ledger in the gateway's database, and
 * `GET /admin/spend` adds them up per key and per model to the cost the answers reported. A restart
 * on the same SQLite file keeps it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startGateway, type TestGateway } from './support/gateway.ts';

const ADMIN = 'admin-key-0123456789abcdef';
const ALICE = 'sk-alice-0123456789abcdef';
const BOB = 'sk-bob-0123456789abcdef01';

interface SpendRow {
  key?: string | null;
  model?: string | null;
  requests: number;
  errors: number;
  tokens_in: number;
  tokens_out: number;
  cost_usd: number;
}

describe('spend ledger and GET /admin/spend', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-spend-'));
  const yaml = `
database: { type: sqlite, path: "${join(dir, 'gw.db')}" }
spend: { flush_ms: 60000 }
backends:
  f: { type: fake }
models:
  cheap: { targets: [ { backend: f, model: echo, price: { input: 1.5, output: 6 } } ] }
  dear: { targets: [ { backend: f, model: echo, price: { input: 30, output: 60 } } ] }
keys:
  - { name: alice, key: "${ALICE}" }
  - { name: bob, key: "${BOB}" }
admin: { key: "${ADMIN}" }
`;
  let gw: TestGateway;
  /** cost each key's answers reported (x-switchyard-cost-usd), in micro-USD */
  const reported = new Map<string, number>();
  const count = new Map<string, number>();

  const spend = async (query: string, key = ADMIN): Promise<{ status: number; body: { data: SpendRow[]; error?: { param?: string } } }> => {
    const r = await fetch(`${gw.url}/admin/spend?${query}`, { headers: { authorization: `Bearer ${key}` } });
    return { status: r.status, body: (await r.json()) as { data: SpendRow[] } };
  };

  before(async () => {
    gw = await startGateway(yaml);
  });
  after(async () => {
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const note = (key: string, model: string, costHeader: string | null): void => {
    assert.ok(costHeader !== null && /^\d/.test(costHeader), `cost header ${String(costHeader)}`);
    reported.set(key, (reported.get(key) ?? 0) + Math.round(Number(costHeader) * 1e6));
    count.set(`${key}/${model}`, (count.get(`${key}/${model}`) ?? 0) + 1);
  };

  test('requests from two keys on every protocol are recorded', async () => {
    const alice = new OpenAI({ baseURL: gw.baseURL, apiKey: ALICE, maxRetries: 0 });
    const bob = new Anthropic({ baseURL: gw.url, apiKey: BOB, maxRetries: 0 });
    for (let i = 0; i < 3; i++) {
      const { response } = await alice.chat.completions.create({ model: 'cheap', messages: [{ role: 'user', content: `hello number ${i} with some words` }] }).withResponse();
      note('alice', 'cheap', response.headers.get('x-switchyard-cost-usd'));
    }
    const { response: r2 } = await alice.responses.create({ model: 'dear', input: 'a longer prompt for the dear model' }).withResponse();
    note('alice', 'dear', r2.headers.get('x-switchyard-cost-usd'));
    const { response: r3 } = await bob.messages.create({ model: 'dear', max_tokens: 32, messages: [{ role: 'user', content: 'bonjour ünïcödé 🚂' }] }).withResponse();
    note('bob', 'dear', r3.headers.get('x-switchyard-cost-usd'));
    // a stream: its cost is known only at the end, and recorded then
    const stream = await alice.chat.completions.create({ model: 'cheap', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream me' }] });
    let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
    for await (const c of stream) if (c.usage) usage = c.usage;
    assert.ok(usage);
    reported.set('alice', (reported.get('alice') ?? 0) + Math.round((usage.prompt_tokens * 1.5 + usage.completion_tokens * 6)));
    count.set('alice/cheap', (count.get('alice/cheap') ?? 0) + 1);
  });

  test('by key: requests and cost equal what the answers reported', async () => {
    const r = await spend('by=key&since=1d');
    assert.equal(r.status, 200);
    const byKey = new Map(r.body.data.map((d) => [d.key, d]));
    assert.deepEqual([...byKey.keys()].sort(), ['alice', 'bob']);
    for (const key of ['alice', 'bob']) {
      const row = byKey.get(key);
      assert.ok(row);
      const n = [...count].filter(([k]) => k.startsWith(`${key}/`)).reduce((a, [, v]) => a + v, 0);
      assert.equal(row.requests, n, key);
      assert.equal(row.errors, 0);
      assert.ok(row.tokens_in > 0 && row.tokens_out > 0);
      assert.equal(Math.round(row.cost_usd * 1e6), reported.get(key), key);
    }
  });

  test('by model, most spent first', async () => {
    const r = await spend('by=model');
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.body.data.map((d) => [d.model, d.requests]),
      [
        ['dear', 2],
        ['cheap', 4],
      ],
    );
  });

  test('bad parameters are 400 naming the parameter; no admin key is 401', async () => {
    for (const [q, param] of [
      ['by=user', 'by'],
      ['since=yesterday', 'since'],
      ['since=1d&until=2d', 'until'],
      ['limit=0', 'limit'],
    ] as const) {
      const r = await spend(q);
      assert.equal(r.status, 400, q);
      assert.equal(r.body.error?.param, param, q);
    }
    assert.equal((await spend('by=key', ALICE)).status, 401);
  });

  test('a restart on the same database file keeps the spend', async () => {
    const before = (await spend('by=key')).body.data;
    await gw.close();
    gw = await startGateway(yaml);
    const again = (await spend('by=key')).body.data;
    assert.deepEqual(again, before);
  });
});
