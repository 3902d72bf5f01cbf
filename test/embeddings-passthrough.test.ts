/**
 * Embeddings through the gateway from an upstream that answers in exactly the format asked: the
 * client gets the upstream's bytes (pretty-printing and number spelling included, so nothing was
 * parsed and printed again), with usage, cost and cache working as for any answer; and an answer
 * that is not already right (wrong count, other format, unsorted, bad numbers) still goes through
 * the full path: converted, sorted or rejected as 502 upstream_malformed_response.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { floatsToBase64 } from '../src/protocol/embeddings/schema.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { startJsonUpstream, type JsonUpstream } from './support/json-upstream.ts';

const VECTORS = [
  [0.5, -0.25, 1e-7, 3],
  [0.125, 0.75, -2.5, 0],
];

/** Pretty-printed, with numbers spelled as JSON.stringify never would (1.0, 1E-7). */
function floatAnswer(vectors: number[][], order = vectors.map((_, i) => i)): string {
  const items = order.map((i) => `    {\n      "object": "embedding",\n      "index": ${i},\n      "embedding": [ ${(vectors[i] ?? []).map((x) => (Number.isInteger(x) ? `${x}.0` : x === 1e-7 ? '1E-7' : String(x))).join(', ')} ]\n    }`);
  return `{\n  "object": "list",\n  "data": [\n${items.join(',\n')}\n  ],\n  "model": "emb-v1",\n  "usage": { "prompt_tokens": 6, "total_tokens": 6 }\n}\n`;
}

function base64Answer(vectors: number[][]): string {
  const data = vectors.map((v, index) => ({ object: 'embedding', index, embedding: floatsToBase64(v) }));
  return JSON.stringify({ object: 'list', data, model: 'emb-v1', usage: { prompt_tokens: 6, total_tokens: 6 } }, null, 1);
}

let upstream: JsonUpstream;
let gw: TestGateway;

/** What the upstream sends, by model name; `format` is the encoding_format it was asked for. */
function answerFor(model: string, format: string): string {
  switch (model) {
    case 'ignores-base64':
      return floatAnswer(VECTORS);
    case 'unsorted':
      return floatAnswer(VECTORS, [1, 0]);
    case 'one-short':
      return floatAnswer(VECTORS.slice(0, 1));
    case 'nan':
      return floatAnswer(VECTORS).replace('0.5', 'NaN');
    default:
      return format === 'base64' ? base64Answer(VECTORS) : floatAnswer(VECTORS);
  }
}

before(async () => {
  upstream = await startJsonUpstream((body) => ({ text: answerFor(body.model as string, (body.encoding_format as string | undefined) ?? '') }));
  const base = upstream.baseURL;
  const models = ['exact', 'ignores-base64', 'unsorted', 'one-short', 'nan', 'cached'];
  gw = await startGateway(`
backends:
  up:
    type: openai
    base_url: ${base}
    api_key: sk-embeddings-passthrough-test
models:
${models.map((m) => `  ${m}:\n    targets: [{ backend: up, model: ${m}, price: { input: 1.0, output: 0 } }]`).join('\n')}
cache:
  enabled: true
  ttl_seconds: 60
`);
});

after(async () => {
  await gw.close();
  await upstream.close();
});

async function post(model: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(`${gw.baseURL}/embeddings`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers },
    body: JSON.stringify({ model, input: ['one', 'two'], ...extra }),
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

describe('embeddings passthrough', () => {
  it('forwards a float answer as the upstream wrote it, and accounts for its usage', async () => {
    const r = await post('exact');
    assert.equal(r.status, 200);
    assert.equal(r.text, floatAnswer(VECTORS));
    assert.equal(r.headers.get('content-type'), 'application/json');
    // 6 prompt tokens at $1 per million
    assert.equal(r.headers.get('x-switchyard-cost-usd'), '0.000006');
  });

  it('forwards a base64 answer as the upstream wrote it', async () => {
    const r = await post('exact', { encoding_format: 'base64' });
    assert.equal(r.status, 200);
    assert.equal(r.text, base64Answer(VECTORS));
  });

  it('converts when the upstream ignored encoding_format', async () => {
    const r = await post('ignores-base64', { encoding_format: 'base64' });
    assert.equal(r.status, 200);
    const body = JSON.parse(r.text) as { data: Array<{ embedding: unknown }> };
    assert.deepEqual(
      body.data.map((d) => d.embedding),
      VECTORS.map((v) => floatsToBase64(v)),
    );
  });

  it('sorts an answer whose items are out of order', async () => {
    const r = await post('unsorted');
    assert.equal(r.status, 200);
    const body = JSON.parse(r.text) as { data: Array<{ index: number; embedding: number[] }> };
    assert.deepEqual(
      body.data.map((d) => d.index),
      [0, 1],
    );
    assert.deepEqual(body.data[0]?.embedding, VECTORS[0]);
  });

  it('rejects an answer with fewer vectors than inputs as 502 upstream_malformed_response', async () => {
    const r = await post('one-short');
    assert.equal(r.status, 502);
    const body = JSON.parse(r.text) as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'upstream_malformed_response');
    assert.match(body.error.message, /1 embeddings for 2 inputs/);
  });

  it('rejects an answer with NaN in it as 502 upstream_malformed_response', async () => {
    const r = await post('nan');
    assert.equal(r.status, 502);
    assert.equal((JSON.parse(r.text) as { error: { code: string } }).error.code, 'upstream_malformed_response');
  });

  it('caches a forwarded answer and serves the same vectors from the cache', async () => {
    const before = upstream.calls;
    const first = await post('cached', {}, { 'cache-control': '' });
    const second = await post('cached', {}, { 'cache-control': '' });
    assert.equal(first.headers.get('x-switchyard-cache'), 'miss');
    assert.equal(second.headers.get('x-switchyard-cache'), 'hit');
    assert.equal(upstream.calls - before, 1);
    assert.deepEqual(JSON.parse(second.text), JSON.parse(first.text));
  });

  it('works through the openai SDK in both formats', async () => {
    const client = new OpenAI({ apiKey: 'unused', baseURL: gw.baseURL, maxRetries: 0 });
    const f = await client.embeddings.create({ model: 'exact', input: ['one', 'two'], encoding_format: 'float' });
    assert.deepEqual(
      f.data.map((d) => d.embedding),
      VECTORS,
    );
    assert.equal(f.usage.prompt_tokens, 6);
    // the SDK asks for base64 by default and decodes it itself
    const b = await client.embeddings.create({ model: 'exact', input: ['one', 'two'] });
    assert.deepEqual(
      b.data.map((d) => d.embedding.map((x) => Math.fround(x))),
      VECTORS.map((v) => v.map((x) => Math.fround(x))),
    );
  });
});
