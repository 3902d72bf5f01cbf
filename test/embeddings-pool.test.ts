/**
 * Large embeddings answers forwarded as the upstream's bytes are read into buffers the gateway
 * reuses once an answer was handed to the OS (src/backends/upstream/body-pool.ts). What a client must never
 * see: another answer's bytes. Every answer here is distinct (its numbers come from its input) and
 * compared byte for byte with what the upstream sent: in sequence (sizes going up and down, so a
 * reused buffer longer than the answer would show), concurrently, while a slow client still reads
 * a multi-megabyte answer, after a client went away mid-answer, and when coalesced requests share
 * one upstream answer.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { startJsonUpstream, type JsonUpstream } from './support/json-upstream.ts';

/** The upstream's answer for `input` with `dims` numbers per vector: distinct per input. */
function answer(input: string, dims: number): string {
  let seed = 0;
  for (const ch of input) seed = (seed * 31 + ch.charCodeAt(0)) >>> 0;
  const vec = (k: number): string => {
    const xs: string[] = [];
    for (let i = 0; i < dims; i++) xs.push(String((((seed + k * 7919 + i * 104729) % 1000003) / 1000003 - 0.5).toFixed(6)));
    return xs.join(',');
  };
  return `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[${vec(0)}]},{"object":"embedding","index":1,"embedding":[${vec(1)}]}],"model":"emb","usage":{"prompt_tokens":4,"total_tokens":4}}`;
}

/** Numbers per vector by model name. */
const DIMS: Record<string, number> = { small: 6_000, large: 9_000, huge: 400_000, shared: 400_000 };

let upstream: JsonUpstream;
let gw: TestGateway;

before(async () => {
  upstream = await startJsonUpstream((body) => {
    const model = body.model as string;
    return { text: answer((body.input as string[]).join('|'), DIMS[model] ?? 10), delayMs: model === 'shared' ? 150 : undefined };
  });
  gw = await startGateway(`
backends:
  up: { type: openai, base_url: "${upstream.baseURL}", api_key: sk-pool-test }
models:
${Object.keys(DIMS)
  .map((m) => `  ${m}: { targets: [ { backend: up, model: ${m} } ] }`)
  .join('\n')}
cache: { enabled: true, ttl_seconds: 60 }
`);
});

after(async () => {
  await gw.close();
  await upstream.close();
});

let n = 0;
const fresh = (): string[] => [`input ${++n}`, `${Date.now()}`];

async function post(model: string, input: string[], cache = false): Promise<string> {
  const res = await fetch(`${gw.baseURL}/embeddings`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(cache ? {} : { 'cache-control': 'no-store' }) },
    body: JSON.stringify({ model, input, encoding_format: 'float' }),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text.slice(0, 300));
  return text;
}

/** A client that reads the answer's head and then nothing until `rest()` is called. */
function slowRead(model: string, input: string[], cache = false): Promise<{ rest(): Promise<string> }> {
  const url = new URL(`${gw.baseURL}/embeddings`);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', ...(cache ? {} : { 'cache-control': 'no-store' }) } }, (res) => {
      res.pause();
      resolve({
        rest: () =>
          new Promise<string>((done) => {
            const parts: Buffer[] = [];
            res.on('data', (d: Buffer) => parts.push(d));
            res.on('end', () => done(Buffer.concat(parts).toString('utf8')));
            res.resume();
          }),
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify({ model, input, encoding_format: 'float' }));
  });
}

describe('large embeddings answers in reused buffers', () => {
  it('in sequence, sizes up and down: every answer is its own, byte for byte', async () => {
    for (let i = 0; i < 24; i++) {
      const model = i % 3 === 0 ? 'large' : 'small';
      const input = fresh();
      assert.equal(await post(model, input), answer(input.join('|'), DIMS[model] as number), `answer ${i}`);
    }
  });

  it('concurrently: every answer is its own', async () => {
    const inputs = Array.from({ length: 16 }, fresh);
    const texts = await Promise.all(inputs.map((input, i) => post(i % 2 ? 'large' : 'small', input)));
    texts.forEach((t, i) => assert.equal(t, answer((inputs[i] as string[]).join('|'), DIMS[i % 2 ? 'large' : 'small'] as number), `answer ${i}`));
  });

  it('a slow client gets its multi-megabyte answer whole while others are served meanwhile', async () => {
    const slowInput = fresh();
    const slow = await slowRead('huge', slowInput);
    // the slow client reads nothing while answers of the same size class come and go
    const others = Array.from({ length: 3 }, fresh);
    for (const input of others) assert.equal(await post('huge', input), answer(input.join('|'), DIMS.huge as number));
    const got = await slow.rest();
    assert.ok(got.length > 4_000_000, `the answer is ${got.length} bytes`);
    assert.equal(got, answer(slowInput.join('|'), DIMS.huge as number));
  });

  it('a client that goes away mid-answer: the answers after it are still their own', async () => {
    const url = new URL(`${gw.baseURL}/embeddings`);
    await new Promise<void>((resolve) => {
      const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'cache-control': 'no-store' } }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => resolve());
      req.end(JSON.stringify({ model: 'huge', input: fresh(), encoding_format: 'float' }));
    });
    for (let i = 0; i < 4; i++) {
      const input = fresh();
      assert.equal(await post(i % 2 ? 'huge' : 'large', input), answer(input.join('|'), DIMS[i % 2 ? 'huge' : 'large'] as number));
    }
  });

  it('coalesced requests share one upstream answer, and each client gets it whole', async () => {
    const input = fresh();
    const before = upstream.calls;
    // one of the five reads nothing until the others are done and other answers have come and gone
    const slow = slowRead('shared', input, true);
    const fast = Promise.all(Array.from({ length: 4 }, () => post('shared', input, true)));
    const expected = answer(input.join('|'), DIMS.shared as number);
    for (const t of await fast) assert.equal(t, expected);
    const others = Array.from({ length: 3 }, fresh);
    for (const o of others) assert.equal(await post('huge', o), answer(o.join('|'), DIMS.huge as number));
    assert.equal(await (await slow).rest(), expected);
    assert.equal(upstream.calls - before, 1 + others.length, 'one upstream call for the five');
    // and then from the cache (which prints the vectors again: the same numbers, spelled its way)
    assert.deepEqual(JSON.parse(await post('shared', input, true)), JSON.parse(expected));
  });
});
