/**
 * `models:` keys as patterns and aliases, end to end: which entry serves a dated model name, what
 * the upstream is asked for, what /v1/models lists, what a key's model list admits, and the metric
 * label (the pattern, never the free-form name). Config mistakes are named at load.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ConfigError, parseConfig } from '../src/config/load.ts';
import { startFakeLlamaServer, type FakeLlamaServer } from './support/fake-llama-server.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { upstreamsWithGateway } from './support/suite.ts';

const TEAM = 'sk-team-0123456789abcdef';
const ALL = 'sk-all-0123456789abcdef0';
const ADMIN = 'admin-key-0123456789abcdef';

describe('model routes by pattern and alias', () => {
  const ctx = upstreamsWithGateway({
    upstreams: { up: {} },
    yaml: ({ up }) => `
backends:
  up: { type: openai, base_url: "${up.url}", api_key: k }
models:
  chat: { targets: [ { backend: up, model: gpt-4o-mini } ] }
  fast: { alias: chat }
  "claude-*": { targets: [ { backend: up, model: "\${0}" } ] }
  "claude-sonnet-*": { targets: [ { backend: up, model: "sonnet-\${1}" } ] }
  "openai/*": { targets: [ { backend: up, model: "\${1}" } ] }
keys:
  - { name: team, key: "${TEAM}", models: ["claude-*"] }
  - { name: all, key: "${ALL}" }
admin: { key: "${ADMIN}" }
`,
  });

  const chat = async (model: string, key = ALL): Promise<{ status: number; body: Record<string, unknown> }> => {
    const r = await fetch(`${ctx.gw.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  const upstreamModel = (): unknown => (ctx.up.requests.at(-1)?.body as { model?: unknown } | undefined)?.model;

  test('a dated name is served by the most specific pattern, its name filled into the target', async () => {
    assert.equal((await chat('claude-haiku-4-5-20251001')).status, 200);
    assert.equal(upstreamModel(), 'claude-haiku-4-5-20251001');
    assert.equal((await chat('claude-sonnet-4-5-20250929')).status, 200);
    assert.equal(upstreamModel(), 'sonnet-4-5-20250929');
    assert.equal((await chat('openai/gpt-4o')).status, 200);
    assert.equal(upstreamModel(), 'gpt-4o');
  });

  test('an alias serves as the model it names; an unmatched name is 404 model_not_found', async () => {
    assert.equal((await chat('fast')).status, 200);
    assert.equal(upstreamModel(), 'gpt-4o-mini');
    const r = await chat('gpt-5');
    assert.equal(r.status, 404);
    assert.equal((r.body.error as { code?: unknown }).code, 'model_not_found');
  });

  test('/v1/models lists concrete names only', async () => {
    const r = await fetch(`${ctx.gw.baseURL}/models`, { headers: { authorization: `Bearer ${ALL}` } });
    const ids = ((await r.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id).sort();
    assert.deepEqual(ids, ['chat', 'fast']);
  });

  test('/v1/models/{id} answers for a name a pattern or an alias serves, within the key\'s models', async () => {
    const get = (id: string, key: string): Promise<Response> => fetch(`${ctx.gw.baseURL}/models/${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${key}` } });
    for (const id of ['claude-haiku-4-5-20251001', 'openai/gpt-4o', 'fast']) {
      const r = await get(id, ALL);
      assert.equal(r.status, 200, id);
      assert.equal(((await r.json()) as { id?: unknown }).id, id);
    }
    assert.equal((await get('claude-opus-4', TEAM)).status, 200);
    for (const [id, key] of [['chat', TEAM], ['openai/gpt-4o', TEAM], ['gpt-5', ALL]] as const) {
      const r = await get(id, key);
      assert.equal(r.status, 404, id);
      assert.equal(((await r.json()) as { error: { code?: unknown } }).error.code, 'model_not_found');
    }
  });

  test("a key's model list names patterns: a name they match is allowed, others do not exist", async () => {
    assert.equal((await chat('claude-opus-4', TEAM)).status, 200);
    const r = await chat('chat', TEAM);
    assert.equal(r.status, 404);
    assert.equal((r.body.error as { code?: unknown }).code, 'model_not_found');
  });

  test('metrics carry the pattern as the model label, not the name the client sent', async () => {
    await chat('claude-haiku-9-20990101');
    const text = await (await fetch(`${ctx.gw.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })).text();
    assert.match(text, /switchyard_requests_total\{[^}]*model="claude-\*"/);
    assert.doesNotMatch(text, /claude-haiku-9-20990101/);
  });
});

describe('model routes: a pattern or alias gets its targets\' translation options', () => {
  let llama: FakeLlamaServer;
  let gw: TestGateway;
  before(async () => {
    llama = await startFakeLlamaServer({ alias: 'qwen-test' });
    gw = await startGateway(`
backends:
  local: { type: llamacpp, base_url: "${llama.url}" }
models:
  "qwen-*": { targets: [ { backend: local, model: qwen-test } ] }
  local: { targets: [ { backend: local, model: qwen-test } ] }
  q: { alias: local }
`);
  });
  after(async () => {
    await gw.close();
    await llama.close();
  });

  // llama-server reads top_k; a Messages request's top_k reaches it whatever name the model was asked by
  for (const model of ['qwen-local', 'q']) {
    test(`Messages top_k reaches llama-server through ${model}`, async () => {
      const r = await fetch(`${gw.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model, max_tokens: 16, top_k: 7, messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(r.status, 200);
      assert.doesNotMatch(r.headers.get('x-switchyard-warnings') ?? '', /top_k/);
      const up = llama.requests.filter((q) => q.path === '/v1/chat/completions').at(-1);
      assert.equal((up?.body as { top_k?: unknown } | undefined)?.top_k, 7);
    });
  }
});

describe('model routes: config mistakes are named', () => {
  const load = (models: string): string[] => {
    try {
      parseConfig(`backends: { up: { type: openai, base_url: "http://127.0.0.1:9/v1", api_key: k } }\nmodels:\n${models}`, 'p.yaml', {});
      return [];
    } catch (err) {
      if (err instanceof ConfigError) return err.problems;
      throw err;
    }
  };

  test('an alias to an unknown model, a cycle, a pattern, and a pattern alias', () => {
    assert.match(load('  a: { alias: nope }').join('\n'), /models\.a\.alias: unknown model "nope"/);
    assert.match(load('  a: { alias: b }\n  b: { alias: a }').join('\n'), /aliases form a cycle/);
    assert.match(load('  "c-*": { targets: [ { backend: up, model: x } ] }\n  a: { alias: "c-*" }').join('\n'), /is a pattern/);
    assert.match(load('  m: { targets: [ { backend: up, model: x } ] }\n  "a-*": { alias: m }').join('\n'), /an alias cannot be a pattern/);
  });

  test('a placeholder with no * to fill it', () => {
    assert.match(load('  m: { targets: [ { backend: up, model: "x-${1}" } ] }').join('\n'), /models\.m\.targets\[0\]\.model: "\$\{1\}" needs a "\*"/);
    assert.match(load('  "m-*": { targets: [ { backend: up, model: "${2}" } ] }').join('\n'), /"\$\{2\}" has no "\*" to fill it/);
    assert.deepEqual(load('  "m-*": { targets: [ { backend: up, model: "${1}" } ] }'), []);
  });

  test('${1} outside a target model is still a malformed variable', () => {
    const problems = load('  m: { targets: [ { backend: "${1}", model: x } ] }').join('\n');
    assert.match(problems, /malformed variable reference/);
  });
});
