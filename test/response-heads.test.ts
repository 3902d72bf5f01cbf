/**
 * The answers the hot routes write straight to Node's response (http/direct.ts, http/sse.ts):
 * each has exactly one head with every header a client relies on — request id, who served it,
 * cost, rate limits — no header twice, a correct content-length on JSON, and the connection stays
 * usable for the next request (keep-alive), including after a stream and after an error answer.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';

const KEY = 'sk-gw-heads-key-0001';

let upstream: FakeUpstream;
let gw: TestGateway;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

before(async () => {
  upstream = await startFakeOpenAI();
  gw = await startGateway(`
backends:
  up: { type: openai, base_url: "${upstream.url}", api_key: "sk-upstream-heads" }
models:
  chat: { targets: [ { backend: up, model: gpt-4o-mini, price: { input: 1.0, output: 2.0 } } ] }
  emb: { targets: [ { backend: up, model: text-embedding-3-small } ] }
keys:
  - { name: k, key: "${KEY}", limits: { rpm: 1000 } }
`);
});

after(async () => {
  agent.destroy();
  await gw.close();
  await upstream.close();
});

interface Raw {
  status: number;
  rawHeaders: string[];
  headers: http.IncomingHttpHeaders;
  body: string;
  socket: unknown;
}

function post(path: string, body: unknown, requestId: string): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${gw.url}${path}`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, 'x-request-id': requestId } },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, rawHeaders: res.rawHeaders, headers: res.headers, body: Buffer.concat(parts).toString('utf8'), socket: req.socket }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

function noDuplicates(r: Raw): void {
  const names = r.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
  assert.deepEqual(
    names.filter((n, i) => names.indexOf(n) !== i),
    [],
    `duplicate headers in ${names.join(', ')}`,
  );
}

describe('heads of directly written answers', () => {
  let firstSocket: unknown;

  it('JSON chat: request id, routing, cost, rate limits, exact content-length', async () => {
    const r = await post('/v1/chat/completions', { model: 'chat', messages: [{ role: 'user', content: 'hi' }] }, 'heads-json-1');
    assert.equal(r.status, 200);
    noDuplicates(r);
    assert.equal(r.headers['x-request-id'], 'heads-json-1');
    assert.equal(r.headers['content-type'], 'application/json');
    assert.equal(Number(r.headers['content-length']), Buffer.byteLength(r.body));
    assert.equal(r.headers['x-switchyard-backend'], 'up');
    assert.equal(r.headers['x-switchyard-model'], 'gpt-4o-mini');
    assert.equal(r.headers['x-switchyard-attempts'], '1');
    assert.match(String(r.headers['x-switchyard-cost-usd']), /^\d+\.\d+$/);
    assert.equal(r.headers['x-ratelimit-limit-requests'], '1000');
    assert.equal((JSON.parse(r.body) as { object: string }).object, 'chat.completion');
    firstSocket = r.socket;
  });

  it('SSE chat: the same headers plus the event-stream ones, ends with [DONE], on the same connection', async () => {
    const r = await post('/v1/chat/completions', { model: 'chat', stream: true, messages: [{ role: 'user', content: 'hi' }] }, 'heads-sse-1');
    assert.equal(r.status, 200);
    noDuplicates(r);
    assert.equal(r.headers['x-request-id'], 'heads-sse-1');
    assert.equal(r.headers['content-type'], 'text/event-stream; charset=utf-8');
    assert.equal(r.headers['cache-control'], 'no-cache, no-transform');
    assert.equal(r.headers['x-switchyard-backend'], 'up');
    assert.equal(r.headers['x-ratelimit-limit-requests'], '1000');
    assert.equal(r.headers['content-length'], undefined);
    assert.ok(r.body.endsWith('data: [DONE]\n\n'));
    assert.equal(r.socket, firstSocket, 'keep-alive connection reused');
  });

  it('embeddings: the same headers, and then an error answer on the same connection', async () => {
    const r = await post('/v1/embeddings', { model: 'emb', input: ['a', 'b'] }, 'heads-emb-1');
    assert.equal(r.status, 200);
    noDuplicates(r);
    assert.equal(r.headers['x-request-id'], 'heads-emb-1');
    assert.equal(Number(r.headers['content-length']), Buffer.byteLength(r.body));
    assert.equal(r.headers['x-switchyard-backend'], 'up');
    assert.equal(r.socket, firstSocket);

    const bad = await post('/v1/chat/completions', { model: 'nope', messages: [{ role: 'user', content: 'hi' }] }, 'heads-err-1');
    assert.equal(bad.status, 404);
    noDuplicates(bad);
    assert.equal(bad.headers['x-request-id'], 'heads-err-1');
    assert.equal(bad.socket, firstSocket);

    const again = await post('/v1/chat/completions', { model: 'chat', messages: [{ role: 'user', content: 'hi' }] }, 'heads-json-2');
    assert.equal(again.status, 200);
    assert.equal(again.headers['x-request-id'], 'heads-json-2');
  });

  it('one log line per answer with its real status', async () => {
    const lines = gw.logs.map((l) => JSON.parse(l) as { msg?: string; request_id?: string; status?: number }).filter((l) => l.msg === 'request');
    const byId = new Map(lines.map((l) => [l.request_id, l.status]));
    assert.equal(byId.get('heads-json-1'), 200);
    assert.equal(byId.get('heads-sse-1'), 200);
    assert.equal(byId.get('heads-emb-1'), 200);
    assert.equal(byId.get('heads-err-1'), 404);
  });
});
