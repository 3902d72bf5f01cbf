import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cacheSchema } from '../config/schema.ts';
import { cacheDirectives, cacheKey, canonicalJson, decide, type KeyParts } from './key.ts';

const base: KeyParts = {
  op: 'chat',
  namespace: 'key:team-a',
  model: 'chat',
  targets: ['openai/gpt-4o-mini', 'claude/haiku'],
  pin: undefined,
  stream: false,
  body: { model: 'chat', messages: [{ role: 'user', content: 'hi' }], temperature: 0 },
};
const key = (over: Partial<KeyParts> = {}, body: Record<string, unknown> = {}): string =>
  cacheKey({ ...base, ...over, body: { ...base.body, ...body } });

describe('canonicalJson', () => {
  it('sorts keys at every level and drops undefined members', () => {
    assert.equal(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: undefined } }), '{"a":{"d":[1,{"y":2,"z":1}]},"b":1}');
    assert.equal(canonicalJson({ a: 1, b: 2 }), canonicalJson({ b: 2, a: 1 }));
    assert.equal(canonicalJson([undefined, null, 'x']), '[null,null,"x"]');
  });
});

describe('cacheKey', () => {
  it('does not depend on the order of fields', () => {
    const reordered = cacheKey({ ...base, body: { temperature: 0, messages: [{ content: 'hi', role: 'user' }], model: 'chat' } });
    assert.equal(reordered, key());
  });

  it('changes with everything that can change the answer', () => {
    const k = key();
    const variants = [
      key({}, { messages: [{ role: 'user', content: 'hi!' }] }),
      key({}, { temperature: 0.5 }),
      key({}, { top_p: 0.9 }),
      key({}, { n: 2 }),
      key({}, { seed: 7 }),
      key({}, { max_tokens: 10 }),
      key({}, { tools: [{ type: 'function', function: { name: 'f' } }] }),
      key({}, { response_format: { type: 'json_object' } }),
      key({}, { top_k: 40 }), // a vendor extra
      key({ namespace: 'key:team-b' }),
      key({ model: 'other' }),
      key({ targets: ['openai/gpt-4o'] }),
      key({ targets: ['claude/haiku', 'openai/gpt-4o-mini'] }),
      key({ pin: 'claude' }),
      key({ stream: true }),
      key({ op: 'completions' }),
    ];
    for (const v of variants) assert.notEqual(v, k);
    assert.equal(new Set(variants).size, variants.length);
  });

  it('ignores what cannot change the answer', () => {
    const k = key();
    assert.equal(key({}, { user: 'u1', metadata: { a: 'b' }, stream_options: { include_usage: true }, store: false, stream: true }), k);
    assert.equal(key({}, { seed: null }), k, 'a top-level null is the default, like an absent field');
  });
});

describe('decide', () => {
  const on = cacheSchema.parse({ enabled: true });
  const none = { noCache: false, noStore: false };
  it('caches deterministic generation only, unless configured', () => {
    assert.deepEqual(decide(on, 'chat', { temperature: 0 }, none), { use: true, read: true });
    assert.deepEqual(decide(on, 'chat', { temperature: 0.7 }, none), { use: false, why: 'temperature' });
    assert.deepEqual(decide(on, 'chat', {}, none), { use: false, why: 'temperature' }, 'no temperature = the default of 1');
    assert.deepEqual(decide(on, 'embeddings', {}, none), { use: true, read: true });
    const loose = cacheSchema.parse({ enabled: true, cache_nonzero_temperature: true });
    assert.deepEqual(decide(loose, 'chat', { temperature: 1.2 }, none), { use: true, read: true });
  });

  it('honours Cache-Control no-store (bypass) and no-cache (refresh)', () => {
    assert.deepEqual(decide(on, 'chat', { temperature: 0 }, cacheDirectives('no-store')), { use: false, why: 'no-store' });
    assert.deepEqual(decide(on, 'chat', { temperature: 0 }, cacheDirectives('max-age=0, No-Cache')), { use: true, read: false });
    assert.deepEqual(decide(cacheSchema.parse({}), 'chat', { temperature: 0 }, none), { use: false, why: 'disabled' });
  });
});
