/**
 * The `onnx` backend end to end: tiny ONNX models and a WordPiece tokenizer.json are generated
 * here (no model hub), laid out as users do (`models/<name>/<version>/`), loaded through the real
 * gateway from YAML, and called through the official `openai` SDK. Every vector is checked against
 * a plain TypeScript computation: tokenize with the same tokenizer.json, look up the table rows,
 * masked mean (or CLS), L2 normalisation.
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Tokenizer } from '@huggingface/tokenizers';
import OpenAI from 'openai';
import { OnnxBackend } from '../src/backends/onnx/backend.ts';
import { parseConfig } from '../src/config/load.ts';
import { startServer } from '../src/main.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { randomTable, writeTinyModel } from './support/onnx-model.ts';
import { VOCAB, writeTokenizer } from './support/wordpiece.ts';

const DIM = 8;
const root = join(import.meta.dirname, '..', '.cache', `onnx-test-${process.pid}`);
/** Paths in the config are relative to the working directory, as users write them. */
const rel = (...p: string[]): string => relative(process.cwd(), join(root, ...p));

const tables = {
  v1: randomTable(VOCAB.length, DIM, 11),
  v2: randomTable(VOCAB.length, DIM, 22),
  types: randomTable(2, DIM, 33),
};

const TEXTS = [
  'The quick brown fox jumps over the lazy dog.',
  'hello world',
  'Switchyard embeds one vector, two vectors, three!',
  'a cat sat on the red mat',
  'unknownword',
];

// ------------------------------------------------------------------ the reference computation
let tokenizer: Tokenizer;
const tokenize = (text: string): number[] => tokenizer.encode(text).ids;

function reference(ids: readonly number[], o: { table: number[][]; typeTable?: number[][]; pooling?: 'mean' | 'cls' }): number[] {
  const rows = ids.map((id) => (o.table[id] ?? []).map((x, d) => x + (o.typeTable?.[0]?.[d] ?? 0)));
  const used = o.pooling === 'cls' ? rows.slice(0, 1) : rows;
  const v = new Array<number>(DIM).fill(0);
  for (const r of used) r.forEach((x, d) => (v[d] = (v[d] ?? 0) + x / used.length));
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return v.map((x) => x / norm);
}

function assertClose(actual: readonly number[], expected: readonly number[], what: string, tol = 1e-5): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  actual.forEach((a, i) => assert.ok(Math.abs(a - (expected[i] ?? NaN)) <= tol, `${what}[${i}]: ${a} vs ${expected[i]}`));
}

const decode = (b64: string): number[] => {
  const buf = Buffer.from(b64, 'base64');
  return Array.from(new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4));
};

function layout(): void {
  rmSync(root, { recursive: true, force: true });
  // models/<name>/<version>/{model.onnx,tokenizer.json}
  writeTinyModel(join(root, 'models/tiny/v1/model.onnx'), { table: tables.v1, metadata: { version: 'v1' } });
  writeTokenizer(join(root, 'models/tiny/v1/tokenizer.json'));
  writeTinyModel(join(root, 'models/tiny/v2/model.onnx'), { table: tables.v2, metadata: { version: 'v2' } });
  writeTokenizer(join(root, 'models/tiny/v2/tokenizer.json'));
  writeTinyModel(join(root, 'models/tokens/v1/model.onnx'), { table: tables.v1, output: 'token', typeTable: tables.types });
  writeTokenizer(join(root, 'models/tokens/v1/tokenizer.json'));
  writeTinyModel(join(root, 'models/renamed/v1/model.onnx'), { table: tables.v1, names: { ids: 'ids', mask: 'mask' } });
  writeTokenizer(join(root, 'models/renamed/v1/tokenizer.json'));
}

const yaml = (): string => `
backends:
  tiny:      { type: onnx, model_path: ${rel('models/tiny/v1/model.onnx')} }
  tiny-v2:   { type: onnx, model_path: ${rel('models/tiny/v2/model.onnx')}, tokenizer_path: ${rel('models/tiny/v2/tokenizer.json')} }
  tokens:    { type: onnx, model_path: ${rel('models/tokens/v1/model.onnx')} }
  cls:       { type: onnx, model_path: ${rel('models/tokens/v1/model.onnx')}, pooling: cls }
  short:     { type: onnx, model_path: ${rel('models/tiny/v1/model.onnx')}, max_length: 4 }
  batched:   { type: onnx, model_path: ${rel('models/tiny/v1/model.onnx')}, batch: { window_ms: 25, max_batch_size: 64 } }
  unbatched: { type: onnx, model_path: ${rel('models/tiny/v1/model.onnx')}, batch: { window_ms: 0, max_batch_size: 1 } }
  renamed:   { type: onnx, model_path: ${rel('models/renamed/v1/model.onnx')} }
  missing:   { type: onnx, model_path: ${rel('models/nothing/v1/model.onnx')} }
  gpu:       { type: onnx, model_path: ${rel('models/tiny/v1/model.onnx')}, execution_providers: [cuda] }
models:
  tiny:      { targets: [ { backend: tiny, model: tiny-embed-v1 } ] }
  tiny-v2:   { targets: [ { backend: tiny-v2, model: tiny-embed-v2 } ] }
  tokens:    { targets: [ { backend: tokens, model: tiny-tokens } ] }
  cls:       { targets: [ { backend: cls, model: tiny-cls } ] }
  short:     { targets: [ { backend: short, model: tiny-short } ] }
  batched:   { targets: [ { backend: batched, model: tiny } ] }
  unbatched: { targets: [ { backend: unbatched, model: tiny } ] }
  renamed:   { targets: [ { backend: renamed, model: renamed } ] }
  missing:   { targets: [ { backend: missing, model: missing } ] }
`;

function onnxBackend(gw: TestGateway, name: string): OnnxBackend {
  const llm = gw.running.deps.registry.get(name)?.llm;
  assert.ok(llm instanceof OnnxBackend, `${name} is an onnx backend`);
  return llm;
}

describe('onnx backend through the gateway and the OpenAI SDK', () => {
  let gw: TestGateway;
  let client: OpenAI;

  before(async () => {
    layout();
    tokenizer = new Tokenizer(JSON.parse(readFileSync(join(root, 'models/tiny/v1/tokenizer.json'), 'utf8')) as object, {});
    gw = await startGateway(yaml());
    client = new OpenAI({ baseURL: gw.baseURL, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    await gw?.close();
    rmSync(root, { recursive: true, force: true });
  });

  test('float vectors equal the reference computation; usage counts the real tokens', async () => {
    const res = await client.embeddings.create({ model: 'tiny', input: TEXTS, encoding_format: 'float' });
    assert.equal(res.model, 'tiny-embed-v1');
    assert.equal(res.data.length, TEXTS.length);
    TEXTS.forEach((t, i) => assertClose(res.data[i]?.embedding ?? [], reference(tokenize(t), { table: tables.v1 }), `"${t}"`));
    const tokens = TEXTS.reduce((n, t) => n + tokenize(t).length, 0);
    assert.deepEqual(res.usage, { prompt_tokens: tokens, total_tokens: tokens });
    // [UNK] is a real token: the unknown word costs one, plus [CLS] and [SEP]
    assert.deepEqual(tokenize('unknownword'), [2, 1, 3]);
  });

  test('base64 (explicit, and the SDK default) decodes to the very same float32 values', async () => {
    const floats = await client.embeddings.create({ model: 'tiny', input: TEXTS, encoding_format: 'float' });
    const b64 = await client.embeddings.create({ model: 'tiny', input: TEXTS, encoding_format: 'base64' });
    const sdkDefault = await client.embeddings.create({ model: 'tiny', input: TEXTS });
    TEXTS.forEach((_, i) => {
      const raw = b64.data[i]?.embedding as unknown;
      assert.equal(typeof raw, 'string', 'explicit base64 comes back as a string');
      assert.deepEqual(decode(raw as string), floats.data[i]?.embedding);
      assert.deepEqual(sdkDefault.data[i]?.embedding, floats.data[i]?.embedding);
    });
  });

  test('a token-level output with token_type_ids is mean-pooled and normalised by the backend', async () => {
    const res = await client.embeddings.create({ model: 'tokens', input: TEXTS, encoding_format: 'float' });
    TEXTS.forEach((t, i) => assertClose(res.data[i]?.embedding ?? [], reference(tokenize(t), { table: tables.v1, typeTable: tables.types }), `"${t}"`));
  });

  test('pooling: cls takes the [CLS] position', async () => {
    const res = await client.embeddings.create({ model: 'cls', input: TEXTS.slice(0, 2), encoding_format: 'float' });
    const cls = reference([2], { table: tables.v1, typeTable: tables.types });
    for (const d of res.data) assertClose(d.embedding, cls, 'cls');
  });

  test('versioned layout: the v2 directory is a different model, chosen by config alone', async () => {
    const [v1, v2] = await Promise.all([
      client.embeddings.create({ model: 'tiny', input: 'hello world', encoding_format: 'float' }),
      client.embeddings.create({ model: 'tiny-v2', input: 'hello world', encoding_format: 'float' }),
    ]);
    assertClose(v2.data[0]?.embedding ?? [], reference(tokenize('hello world'), { table: tables.v2 }), 'v2');
    assert.notDeepEqual(v1.data[0]?.embedding, v2.data[0]?.embedding);
    assert.equal(onnxBackend(gw, 'tiny-v2').tokenizerPath.endsWith(join('models', 'tiny', 'v2', 'tokenizer.json')), true);
    assert.equal(onnxBackend(gw, 'tiny').tokenizerPath.endsWith(join('models', 'tiny', 'v1', 'tokenizer.json')), true, 'tokenizer.json beside the model by default');
  });

  test('inputs longer than max_length are truncated, keeping [CLS] and [SEP]; usage counts the tokens used', async () => {
    const long = TEXTS[0] ?? '';
    const ids = tokenize(long);
    assert.ok(ids.length > 4);
    const before = onnxBackend(gw, 'short').stats.truncated;
    const res = await client.embeddings.create({ model: 'short', input: [long, 'cat'], encoding_format: 'float' });
    const kept = [ids[0] ?? 0, ids[1] ?? 0, ids[2] ?? 0, ids.at(-1) ?? 0];
    assertClose(res.data[0]?.embedding ?? [], reference(kept, { table: tables.v1 }), 'truncated');
    assertClose(res.data[1]?.embedding ?? [], reference(tokenize('cat'), { table: tables.v1 }), 'short input untouched');
    assert.equal(res.usage.prompt_tokens, 4 + tokenize('cat').length);
    assert.equal(onnxBackend(gw, 'short').stats.truncated, before + 1);
    assert.ok(gw.logs.some((l) => l.includes('truncated') && l.includes('"backend":"short"')), 'said once in the log');
  });

  test('token-array inputs are used as ids (and truncated at max_length)', async () => {
    const one = await client.embeddings.create({ model: 'tiny', input: [2, 16, 17, 3], encoding_format: 'float' });
    assertClose(one.data[0]?.embedding ?? [], reference([2, 16, 17, 3], { table: tables.v1 }), 'flat token array');
    assert.equal(one.usage.prompt_tokens, 4);
    const many = await client.embeddings.create({ model: 'short', input: [[2, 30, 3], [2, 5, 6, 7, 8, 3]], encoding_format: 'float' });
    assertClose(many.data[1]?.embedding ?? [], reference([2, 5, 6, 7], { table: tables.v1 }), 'cut to max_length');
    assert.equal(many.usage.prompt_tokens, 3 + 4);
  });

  test('a token id outside the vocabulary is a 400 naming the input', async () => {
    const err = await client.embeddings.create({ model: 'tiny', input: [[2, 3], [2, 999, 3]] }).then(
      () => assert.fail('expected an error'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.match(err.message, /Token id 999 is outside the model's vocabulary/);
    assert.equal(err.param, 'input[1]');
  });

  test('dimensions: accepted when it equals the model size, else a 400', async () => {
    const ok = await client.embeddings.create({ model: 'tiny', input: 'cat', dimensions: DIM, encoding_format: 'float' });
    assert.equal(ok.data[0]?.embedding.length, DIM);
    const err = await client.embeddings.create({ model: 'tiny', input: 'cat', dimensions: 4 }).then(
      () => assert.fail('expected an error'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof OpenAI.BadRequestError);
    assert.equal(err.param, 'dimensions');
    assert.match(err.message, /produces 8-dimensional embeddings/);
  });

  test('chat is refused: the backend serves embeddings only', async () => {
    const err = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }] }).then(
      () => assert.fail('expected an error'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof OpenAI.BadRequestError);
  });

  test('concurrent requests share session runs, and batched results equal unbatched ones', async () => {
    const inputs = Array.from({ length: 40 }, (_, i) => TEXTS.slice(0, 1 + (i % TEXTS.length)).join(' ') || 'cat');
    const b0 = onnxBackend(gw, 'batched').stats;
    const u0 = onnxBackend(gw, 'unbatched').stats;
    const [batched, unbatched] = await Promise.all([
      Promise.all(inputs.map((input) => client.embeddings.create({ model: 'batched', input, encoding_format: 'float' }))),
      Promise.all(inputs.map((input) => client.embeddings.create({ model: 'unbatched', input, encoding_format: 'float' }))),
    ]);
    const b = onnxBackend(gw, 'batched').stats;
    const u = onnxBackend(gw, 'unbatched').stats;
    assert.equal(b.items - b0.items, inputs.length);
    assert.ok(b.batches - b0.batches < inputs.length, `batched: ${b.batches - b0.batches} runs for ${inputs.length} requests`);
    assert.ok(b.largest > 1);
    assert.equal(u.batches - u0.batches, inputs.length, 'unbatched: one run per request');
    // the batch sizes reach Prometheus too
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    const count = /^switchyard_onnx_batch_size_count\{backend="[^"]*"\} (\d+)/m.exec(metrics);
    assert.ok(count && Number(count[1]) > 0, 'switchyard_onnx_batch_size is observed');
    inputs.forEach((input, i) => {
      const want = reference(tokenize(input), { table: tables.v1 });
      assertClose(batched[i]?.data[0]?.embedding ?? [], unbatched[i]?.data[0]?.embedding ?? [], `batched vs unbatched ${i}`, 1e-6);
      assertClose(batched[i]?.data[0]?.embedding ?? [], want, `reference ${i}`);
    });
  });

  test('a model with other tensor names fails to load with one error naming found vs expected', async () => {
    const entry = gw.running.deps.registry.get('renamed');
    assert.equal(entry?.status, 'failed');
    const line = gw.logs.find((l) => l.includes('backend failed to load') && l.includes('"backend":"renamed"'));
    assert.ok(line, 'reported at start');
    const msg = String((JSON.parse(line) as { error: unknown }).error);
    assert.match(msg, /model\.onnx: the model does not fit the onnx backend: missing inputs "input_ids", "attention_mask"; unexpected inputs "ids", "mask"/);
    assert.match(msg, /It has inputs ids \(int64 \[batch, sequence\]\), mask \(int64 \[batch, sequence\]\)/);
    assert.match(msg, /expected inputs input_ids and attention_mask/);
    const res = await fetch(`${gw.baseURL}/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'renamed', input: 'x' }) });
    assert.equal(res.status, 503, 'a backend whose model failed to load answers 503');
  });

  test('a missing model file and an unavailable execution provider are load failures reported at start', async (t) => {
    const missing = gw.logs.find((l) => l.includes('backend failed to load') && l.includes('"backend":"missing"'));
    assert.ok(missing);
    // the path as written, then where it led from the working directory
    assert.match(missing, /model_path \.cache[^"]*nothing\/v1\/model\.onnx \(\/[^"]*nothing\/v1\/model\.onnx\): file not found/);
    const gpu = gw.running.deps.registry.get('gpu');
    if (gpu?.status === 'ready') return t.skip('this machine has a working CUDA execution provider');
    assert.match(gpu?.loadError ?? '', /execution provider "cuda" is not available .*Available in this onnxruntime-node build: cpu/);
  });

  test('/ready lists each onnx backend as ready or failed', async () => {
    const res = await fetch(`${gw.url}/ready`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { backends: Record<string, string> };
    assert.equal(body.backends.tiny, 'ready');
    assert.equal(body.backends.renamed, 'failed');
  });
});

describe('onnx backend start-up', () => {
  before(() => layout());
  after(() => rmSync(root, { recursive: true, force: true }));

  test('/ready answers 503 until the model has loaded, then 200', async () => {
    const original = OnnxBackend.prototype.load;
    let release = (): void => {};
    const gate = new Promise<void>((r) => (release = r));
    // Holds load() at its start so the loading window can be observed without timing races.
    OnnxBackend.prototype.load = async function (this: OnnxBackend): Promise<void> {
      await gate;
      return original.call(this);
    };
    const loaded = parseConfig(`backends:\n  tiny: { type: onnx, model_path: ${rel('models/tiny/v1/model.onnx')} }\nmodels:\n  tiny: { targets: [ { backend: tiny, model: t } ] }\n`, 'test.yaml', {});
    const running = await startServer(loaded, { logger: createLogger('silent'), port: 0, host: '127.0.0.1' });
    try {
      const r1 = await fetch(`${running.url}/ready`);
      assert.equal(r1.status, 503);
      assert.match(((await r1.json()) as { error: { message: string } }).error.message, /loading "tiny"/);
      const e1 = await fetch(`${running.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tiny', input: 'cat' }) });
      assert.equal(e1.status, 503);
      release();
      await running.deps.lifecycle.loading;
      const r2 = await fetch(`${running.url}/ready`);
      assert.equal(r2.status, 200);
      const e2 = await fetch(`${running.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tiny', input: 'cat' }) });
      assert.equal(e2.status, 200);
    } finally {
      OnnxBackend.prototype.load = original;
      release();
      await running.close(0);
    }
  });
});
