/**
 * Route parity: the generation routes (POST /v1/chat/completions, /v1/completions, /v1/embeddings)
 * may be served by a fast path of the gateway's own, while the same routes spelt with
 * percent-encoding (`/v1/chat/%63ompletions`, which Hono decodes to the same route) still go
 * through Hono. A client must not be able to tell the two apart: for successes, bad input, auth
 * failures, oversized bodies, unknown models, upstream errors, wrong methods and overload, both
 * spellings (and the plain path with a query string) give the same status, the same header names
 * (each once), the same values of the headers clients act on, and the same body — and the
 * keep-alive connection stays usable afterwards.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const KEY = 'sk-gw-parity-key-0001';
const LIMIT = 4096;
const [CHAT, COMPLETIONS, EMBEDDINGS] = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings'] as const;
/** The same routes as Hono decodes them, in a spelling only Hono takes (`c` = %63, `e` = %65). */
const ENCODED: Record<string, string> = { [CHAT]: '/v1/chat/%63ompletions', [COMPLETIONS]: '/v1/%63ompletions', [EMBEDDINGS]: '/v1/%65mbeddings' };
const MSGS = [{ role: 'user', content: 'hi' }];
const GOOD_CHAT = JSON.stringify({ model: 'chat', messages: MSGS });

/** Headers whose values must match exactly between the two paths (plus x-switchyard-* and x-ratelimit-*). */
const SAME_VALUE = new Set(['content-type', 'retry-after', 'x-should-retry', 'connection', 'allow', 'www-authenticate']);
/** Rate-limit headers that move with every request (the allowance refills over time): format only. */
const PER_REQUEST = /^x-ratelimit-(remaining|reset)-/;

/** One answer, with the path and request id it was asked with and the connection it came on. */
interface Answer { path: string; sentId: string; status: number; rawHeaders: string[]; headers: http.IncomingHttpHeaders; body: string; socket: Socket }

interface Req {
  method?: string;
  body?: string;
  /** bearer key; null sends no Authorization header */
  key?: string | null;
  /** send the body with transfer-encoding: chunked instead of content-length */
  chunked?: boolean;
}

let idSeq = 0;

/** One request over `agent`; resolves with the whole answer and the socket it came on. */
function send(base: string, agent: http.Agent, path: string, r: Req = {}): Promise<Answer> {
  const sentId = `parity-${++idSeq}`;
  const method = r.method ?? 'POST';
  const headers: Record<string, string> = { 'x-request-id': sentId };
  if (r.key !== null) headers['authorization'] = `Bearer ${r.key ?? KEY}`;
  if (method === 'POST') {
    headers['content-type'] = 'application/json';
    if (r.chunked) headers['transfer-encoding'] = 'chunked';
    else headers['content-length'] = String(Buffer.byteLength(r.body ?? ''));
  }
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, agent, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('error', reject);
      res.on('end', () =>
        resolve({ path, sentId, status: res.statusCode ?? 0, rawHeaders: res.rawHeaders, headers: res.headers, body: Buffer.concat(parts).toString('utf8'), socket: res.socket }),
      );
    });
    req.on('error', reject);
    if (r.body !== undefined && r.body !== '') req.write(r.body);
    req.end();
  });
}

const headerNames = (a: Answer): string[] => a.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());

/** Replaces what differs on every answer by design (ids, timestamps). */
function normalise(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalise);
  if (typeof v !== 'object' || v === null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = k === 'id' ? '<id>' : k === 'created' ? 0 : normalise(x);
  return out;
}

/** SSE `data:` payloads in order, each normalised. */
function sseEvents(body: string): unknown[] {
  const data = body.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice('data: '.length));
  return data.map((d) => (d === '[DONE]' ? d : normalise(JSON.parse(d))));
}

function bodyOf(a: Answer): unknown {
  const type = String(a.headers['content-type'] ?? '');
  if (type.startsWith('application/json')) return normalise(JSON.parse(a.body));
  if (type.startsWith('text/event-stream')) return sseEvents(a.body);
  return a.body;
}

/** Each header once, and the request id echoed. */
function checkOwnHead(a: Answer): void {
  const names = headerNames(a);
  assert.deepEqual(names.filter((n, i) => names.indexOf(n) !== i), [], `${a.path}: duplicate headers in ${names.join(', ')}`);
  assert.equal(a.headers['x-request-id'], a.sentId, `${a.path}: x-request-id`);
}

/** `b` must be indistinguishable from `a` for a client. */
function assertSameAnswer(a: Answer, b: Answer): void {
  const what = `${a.path} vs ${b.path}`;
  checkOwnHead(a);
  checkOwnHead(b);
  assert.equal(b.status, a.status, `${what}: status; bodies ${a.body} | ${b.body}`);
  const names = (x: Answer): string[] => headerNames(x).filter((n) => n !== 'date').sort();
  assert.deepEqual(names(b), names(a), `${what}: header names`);
  for (const n of names(a)) {
    if (PER_REQUEST.test(n)) {
      assert.match(String(b.headers[n]), /^(\d+|[\d.hms]+)$/, `${what}: ${n}`);
    } else if (SAME_VALUE.has(n) || n.startsWith('x-switchyard-') || n.startsWith('x-ratelimit-')) {
      assert.equal(b.headers[n], a.headers[n], `${what}: ${n}`);
    }
  }
  assert.deepEqual(bodyOf(b), bodyOf(a), `${what}: body`);
}

/** An OpenAI error envelope with exactly its four fields. */
function envelopeOf(a: Answer): { message: string; type: string; param: string | null; code: string | null } {
  assert.equal(a.headers['content-type'], 'application/json', `${a.path}: content-type of an error`);
  const body = JSON.parse(a.body) as { error: { message: string; type: string; param: string | null; code: string | null } };
  assert.deepEqual(Object.keys(body), ['error']);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
  return body.error;
}

interface Target {
  url: string;
  agent: http.Agent;
}

/**
 * Sends `r` to `plain`, its percent-encoded spelling and (withQuery) `plain?x=1`, one after the
 * other on the same keep-alive agent, and checks every answer against the first. Unless the
 * answer closes the connection (413) or `followUp` is false, a good request then succeeds on the
 * same connection.
 */
async function parity(t: Target, plain: string, r: Req, opts: { withQuery?: boolean; followUp?: boolean } = {}): Promise<Answer> {
  const encoded = ENCODED[plain];
  assert.ok(encoded !== undefined);
  const paths = [plain, encoded, ...(opts.withQuery ? [`${plain}?x=1`] : [])];
  const answers: Answer[] = [];
  for (const p of paths) answers.push(await send(t.url, t.agent, p, r));
  const [first, ...rest] = answers as [Answer, ...Answer[]];
  for (const b of rest) assertSameAnswer(first, b);
  if (first.status === 413) {
    for (const a of answers) assert.equal(a.headers.connection, 'close', `${a.path}: 413 closes the connection`);
    await followUp(t); // on a fresh connection
  } else {
    for (const a of answers) assert.equal(a.socket, first.socket, `${a.path}: keep-alive connection reused`);
    if (opts.followUp !== false) assert.equal((await followUp(t)).socket, first.socket, 'follow-up on the same connection');
  }
  return first;
}

async function followUp(t: Target): Promise<Answer> {
  const a = await send(t.url, t.agent, CHAT, { body: GOOD_CHAT });
  assert.equal(a.status, 200, `follow-up: ${a.body}`);
  return a;
}

/** An upstream whose chat stream sends its head and one content chunk, then waits for `release`. */
async function startHeldUpstream(): Promise<{ url: string; held: () => number; release: () => void; close: () => Promise<void> }> {
  const open: http.ServerResponse[] = [];
  const chunk = (delta: Record<string, unknown>, finish: string | null): string =>
    `data: ${JSON.stringify({ id: 'c-held', object: 'chat.completion.chunk', created: 1, model: 'held', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(chunk({ role: 'assistant', content: '' }, null));
      res.write(chunk({ content: 'held' }, null));
      open.push(res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    held: () => open.length,
    release: () => {
      for (const res of open.splice(0)) res.end(chunk({}, 'stop') + 'data: [DONE]\n\n');
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** The gateway under test; `heldUrl` adds a model `held` served by startHeldUpstream. */
const gatewayYaml = (upstreamUrl: string, opts: { maxConcurrent?: number; heldUrl?: string } = {}): string => `
server: { max_body_bytes: ${LIMIT}${opts.maxConcurrent ? `, max_concurrent_requests: ${opts.maxConcurrent}` : ''} }
routing: { retry: { max_retries: 0 }, breaker: { consecutive_failures: 0 } }
backends:
  up: { type: openai, base_url: "${upstreamUrl}", api_key: "sk-upstream-parity" }
${opts.heldUrl ? `  slow: { type: openai, base_url: "${opts.heldUrl}" }` : ''}
models:
  chat: { targets: [ { backend: up, model: gpt-4o-mini, price: { input: 1.0, output: 2.0 } } ] }
  emb: { targets: [ { backend: up, model: text-embedding-3-small } ] }
  limited: { targets: [ { backend: up, model: upstream-429 } ] }
  broken: { targets: [ { backend: up, model: upstream-500 } ] }
${opts.heldUrl ? '  held: { targets: [ { backend: slow, model: held } ] }' : ''}
keys:
  - { name: k, key: "${KEY}", limits: { rpm: 100000, tpm: 100000000 } }
`;

let upstream: FakeUpstream;
let gw: TestGateway;
let t: Target;

before(async () => {
  upstream = await startFakeOpenAI();
  upstream.onModel('upstream-429', { kind: 'error', status: 429, message: 'Slow down.', headers: { 'retry-after': '3' } });
  upstream.onModel('upstream-500', { kind: 'error', status: 500, message: 'The upstream broke.' });
  gw = await startGateway(gatewayYaml(upstream.url));
  t = { url: gw.url, agent: new http.Agent({ keepAlive: true, maxSockets: 1 }) };
});

after(async () => {
  t.agent.destroy();
  await gw.close();
  await upstream.close();
});

describe('route parity: fast path and Hono give the same answers', () => {
  it('success: chat, streaming chat, legacy completions, embeddings', async () => {
    const chat = await parity(t, CHAT, { body: GOOD_CHAT }, { withQuery: true });
    assert.equal(chat.status, 200);
    assert.equal((JSON.parse(chat.body) as { object: string }).object, 'chat.completion');

    const sse = await parity(t, CHAT, { body: JSON.stringify({ model: 'chat', stream: true, messages: MSGS }) }, { withQuery: true });
    assert.equal(sse.status, 200);
    assert.equal(sse.headers['content-type'], 'text/event-stream; charset=utf-8');
    assert.ok(sse.body.endsWith('data: [DONE]\n\n'), sse.body);
    assert.ok(sseEvents(sse.body).length > 2);

    const legacy = await parity(t, COMPLETIONS, { body: JSON.stringify({ model: 'chat', prompt: 'hi' }) });
    assert.equal(legacy.status, 200);
    assert.equal((JSON.parse(legacy.body) as { object: string }).object, 'text_completion');

    const emb = await parity(t, EMBEDDINGS, { body: JSON.stringify({ model: 'emb', input: ['a', 'b'] }) });
    assert.equal(emb.status, 200);
    assert.equal((JSON.parse(emb.body) as { data: unknown[] }).data.length, 2);
  });

  it('malformed JSON, wrong types and an empty body → 400', async () => {
    const malformed = await parity(t, CHAT, { body: '{"model": "chat", "messages": [' }, { withQuery: true });
    assert.equal(malformed.status, 400);
    assert.equal(envelopeOf(malformed).type, 'invalid_request_error');

    const wrongType = await parity(t, CHAT, { body: JSON.stringify({ model: 'chat', messages: 'hi' }) });
    assert.equal(wrongType.status, 400);
    assert.equal(envelopeOf(wrongType).param, 'messages');

    const wrongInput = await parity(t, EMBEDDINGS, { body: JSON.stringify({ model: 'emb', input: { a: 1 } }) });
    assert.equal(wrongInput.status, 400);
    assert.equal(envelopeOf(wrongInput).param, 'input');

    for (const plain of [CHAT, COMPLETIONS, EMBEDDINGS]) {
      const empty = await parity(t, plain, { body: '' });
      assert.equal(empty.status, 400);
      assert.match(envelopeOf(empty).message, /empty/);
    }
  });

  it('no key and a wrong key → 401', async () => {
    const none = await parity(t, CHAT, { body: GOOD_CHAT, key: null });
    assert.equal(none.status, 401);
    assert.equal(envelopeOf(none).code, 'invalid_api_key');
    const wrong = await parity(t, EMBEDDINGS, { body: JSON.stringify({ model: 'emb', input: 'a' }), key: 'sk-wrong-key-00000000' });
    assert.equal(wrong.status, 401);
    assert.equal(envelopeOf(wrong).code, 'invalid_api_key');
  });

  it('a body over max_body_bytes → 413 with connection: close, declared or chunked', async () => {
    const big = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'a'.repeat(LIMIT) }] });
    const declared = await parity(t, CHAT, { body: big });
    assert.equal(declared.status, 413);
    assert.equal(envelopeOf(declared).code, 'request_too_large');
    const chunked = await parity(t, CHAT, { body: big, chunked: true });
    assert.equal(chunked.status, 413);
    assert.equal(envelopeOf(chunked).code, 'request_too_large');
  });

  it('an unknown model → 404 model_not_found', async () => {
    const chat = await parity(t, CHAT, { body: JSON.stringify({ model: 'nope', messages: MSGS }) });
    assert.equal(chat.status, 404);
    assert.equal(envelopeOf(chat).code, 'model_not_found');
    const emb = await parity(t, EMBEDDINGS, { body: JSON.stringify({ model: 'nope', input: 'a' }) });
    assert.equal(emb.status, 404);
  });

  it('an upstream error (429, 500) → the same status and envelope on both paths', async () => {
    const limited = await parity(t, CHAT, { body: JSON.stringify({ model: 'limited', messages: MSGS }) });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers['retry-after'], '3');
    assert.equal(envelopeOf(limited).type, 'rate_limit_error');
    const limitedStream = await parity(t, CHAT, { body: JSON.stringify({ model: 'limited', stream: true, messages: MSGS }) });
    assert.equal(limitedStream.status, 429);
    const broken = await parity(t, COMPLETIONS, { body: JSON.stringify({ model: 'broken', prompt: 'hi' }) });
    assert.equal(broken.status, 502);
    assert.equal(envelopeOf(broken).code, 'upstream_error');
  });

  it('GET on a POST route → 405 with allow: POST (control: Hono on both)', async () => {
    const get = await parity(t, CHAT, { method: 'GET' });
    assert.equal(get.status, 405);
    assert.equal(get.headers.allow, 'POST');
    assert.equal(envelopeOf(get).code, 'method_not_allowed');
  });
});

describe('route parity under overload (server.max_concurrent_requests: 1)', () => {
  let held: Awaited<ReturnType<typeof startHeldUpstream>>;
  let gw2: TestGateway;
  let t2: Target;

  before(async () => {
    held = await startHeldUpstream();
    gw2 = await startGateway(gatewayYaml(upstream.url, { maxConcurrent: 1, heldUrl: held.url }));
    t2 = { url: gw2.url, agent: new http.Agent({ keepAlive: true, maxSockets: 1 }) };
  });

  after(async () => {
    t2.agent.destroy();
    held.release();
    await gw2.close();
    await held.close();
  });

  it('503 server_overloaded with retry-after on both paths while a stream holds the slot; served again after', async () => {
    const oneOff = new http.Agent({ keepAlive: false });
    const stream = send(gw2.url, oneOff, CHAT, { body: JSON.stringify({ model: 'held', stream: true, messages: MSGS }) });
    for (let waited = 0; held.held() < 1; waited += 10) {
      assert.ok(waited < 5000, 'the held stream reached its upstream');
      await new Promise((r) => setTimeout(r, 10));
    }

    let refused: Answer | undefined;
    for (const [plain, r] of [
      [CHAT, { body: GOOD_CHAT }],
      [EMBEDDINGS, { body: JSON.stringify({ model: 'emb', input: 'a' }) }],
    ] as const) {
      refused = await parity(t2, plain, r, { withQuery: plain === CHAT, followUp: false });
      assert.equal(refused.status, 503);
      assert.equal(refused.headers['retry-after'], '1');
      assert.equal(envelopeOf(refused).code, 'server_overloaded');
    }

    held.release();
    const finished = await stream;
    assert.equal(finished.status, 200);
    assert.ok(finished.body.endsWith('data: [DONE]\n\n'), finished.body);
    oneOff.destroy();
    const ok = await parity(t2, CHAT, { body: GOOD_CHAT }, { withQuery: true });
    assert.equal(ok.status, 200);
    assert.equal(ok.socket, refused?.socket, 'the connection that got the 503s serves again');
  });
});
