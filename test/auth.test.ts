/**
 * Bearer-key auth, end to end: with `keys` configured every /v1 route needs a valid key, the
 * failure is a 401 OpenAI envelope that never echoes what was sent, health probes stay open, and
 * the request log names the key (`team-a`) but never contains a key. Without `keys`, no auth.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { postHead, rawSocket } from './support/hostile.ts';

async function waitFor(ok: () => boolean, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

const KEY = 'sk-gw-team-a-123';
const BACKENDS = `
server: { max_body_bytes: 65536 }
backends: { demo: { type: fake, embedding_dimensions: 8 } }
models:
  chat: { targets: [ { backend: demo, model: echo } ] }
`;
const WITH_KEYS = `${BACKENDS}keys: [ { name: team-a, key: "${KEY}" } ]\n`;
const CHAT = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] });

interface Envelope {
  error: { message: string; type: string; param: string | null; code: string | null };
}

function chat(gw: TestGateway, headers: Record<string, string> = {}, body = CHAT): Promise<Response> {
  return fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
}

async function expect401(res: Response, mustNotContain: string[] = []): Promise<Envelope['error']> {
  assert.equal(res.status, 401);
  assert.equal(res.headers.get('content-type'), 'application/json');
  assert.ok(res.headers.get('x-request-id'));
  const text = await res.text();
  const body = JSON.parse(text) as Envelope;
  assert.deepEqual(Object.keys(body), ['error']);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(body.error.type, 'authentication_error');
  assert.equal(body.error.code, 'invalid_api_key');
  assert.equal(body.error.param, null);
  assert.ok(body.error.message.length > 0);
  for (const s of [KEY, ...mustNotContain]) assert.ok(!text.includes(s), `the response echoes ${JSON.stringify(s)}: ${text}`);
  return body.error;
}

type LogLine = Record<string, unknown>;
const requestLog = (gw: TestGateway, id: string): LogLine | undefined =>
  gw.logs.map((l) => JSON.parse(l) as LogLine).find((l) => l.msg === 'request' && l.request_id === id);

describe('auth with keys configured', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway(WITH_KEYS);
  });
  after(async () => {
    await gw.close();
  });

  it('no Authorization header → 401 invalid_api_key', async () => {
    const e = await expect401(await chat(gw));
    assert.match(e.message, /API key/);
  });

  it('a wrong key → 401, and the message does not echo it', async () => {
    const wrong = 'sk-gw-wrong-key-98765';
    await expect401(await chat(gw, { authorization: `Bearer ${wrong}` }), [wrong, 'wrong-key']);
    // near misses are wrong keys too
    await expect401(await chat(gw, { authorization: `Bearer ${KEY.slice(0, -1)}` }), [KEY.slice(0, -1)]);
    await expect401(await chat(gw, { authorization: `Bearer ${KEY}x` }), [`${KEY}x`]);
    await expect401(await chat(gw, { authorization: `Bearer ${KEY.toUpperCase()}` }), [KEY.toUpperCase()]);
  });

  it('the Basic scheme and other malformed headers → 401', async () => {
    const basic = Buffer.from(`team-a:${KEY}`).toString('base64');
    await expect401(await chat(gw, { authorization: `Basic ${basic}` }), [basic]);
    await expect401(await chat(gw, { authorization: `Basic ${KEY}` }));
    await expect401(await chat(gw, { authorization: KEY }));
    await expect401(await chat(gw, { authorization: 'Bearer' }));
    await expect401(await chat(gw, { authorization: `Bearer ${KEY} extra` }));
  });

  it('auth is checked before the body: a bad body without a key is a 401, not a 400', async () => {
    await expect401(await chat(gw, {}, '{not json'));
  });

  it('the body of a refused request: one that arrives whole is dropped and the connection carries the next request; one that keeps coming gets its connection closed', async () => {
    const body = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'x'.repeat(20_000) }] });
    const whole = rawSocket(gw.url, postHead('/v1/chat/completions', Buffer.byteLength(body)) + body);
    await waitFor(() => whole.received().includes('}}'));
    assert.match(whole.received(), /^HTTP\/1\.1 401 /);
    whole.socket.write(postHead('/v1/chat/completions', Buffer.byteLength(CHAT), `authorization: Bearer ${KEY}\r\n`) + CHAT);
    await waitFor(() => whole.received().includes('echo: hi'));
    whole.socket.destroy();
    // a 50 MB body trickling in: answered at once, then cut (after ~0.5 s) rather than read to its end
    const endless = rawSocket(gw.url, postHead('/v1/chat/completions', 50_000_000) + '{"model":"chat",', 15_000);
    const trickle = setInterval(() => endless.socket.write('"x":1,'), 20);
    const r = await endless.done;
    clearInterval(trickle);
    assert.match(r.data, /^HTTP\/1\.1 401 /);
    assert.ok(r.closedAfterMs < 10_000, `closed after ${r.closedAfterMs} ms`);
  });

  it('the right key → 200', async () => {
    const res = await chat(gw, { authorization: `Bearer ${KEY}` });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    assert.equal(body.choices[0]?.message.content, 'echo: hi');
    // the scheme is case-insensitive (RFC 9110)
    const lower = await chat(gw, { authorization: `bearer ${KEY}` });
    assert.equal(lower.status, 200);
    await lower.arrayBuffer();
    const emb = await fetch(`${gw.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: 'chat', input: 'x' }),
    });
    assert.equal(emb.status, 200);
    await emb.arrayBuffer();
  });

  it('/health and /ready need no key', async () => {
    const health = await fetch(`${gw.url}/health`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok' });
    const ready = await fetch(`${gw.url}/ready`);
    assert.equal(ready.status, 200);
    await ready.arrayBuffer();
  });

  it('/v1/models needs a key', async () => {
    await expect401(await fetch(`${gw.url}/v1/models`));
    await expect401(await fetch(`${gw.url}/v1/models/chat`));
    const res = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { object: string; data: Array<{ id: string }> };
    assert.equal(body.object, 'list');
    assert.deepEqual(body.data.map((m) => m.id), ['chat']);
  });

  it("the log line carries the key's name and never a key", async () => {
    const ok = await chat(gw, { authorization: `Bearer ${KEY}`, 'x-request-id': 'auth-log-ok' });
    assert.equal(ok.status, 200);
    await ok.arrayBuffer();
    const denied = await chat(gw, { authorization: 'Bearer sk-gw-not-a-real-key-555', 'x-request-id': 'auth-log-denied' });
    assert.equal(denied.status, 401);
    await denied.arrayBuffer();

    const okLine = requestLog(gw, 'auth-log-ok');
    assert.ok(okLine, 'a log line for the accepted request');
    assert.equal(okLine.key, 'team-a');
    assert.equal(okLine.status, 200);
    const deniedLine = requestLog(gw, 'auth-log-denied');
    assert.ok(deniedLine, 'a log line for the denied request');
    assert.equal(deniedLine.status, 401);
    assert.equal(deniedLine.key, undefined);
    assert.equal(deniedLine.error, 'invalid_api_key');

    const all = gw.logs.join('');
    assert.ok(!all.includes(KEY), 'the configured key is never logged');
    assert.ok(!all.includes('sk-gw-not-a-real-key-555'), 'a presented key is never logged');
    assert.ok(!all.includes('sk-gw-wrong-key-98765'), 'a presented key is never logged');
  });
});

describe('auth without keys', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway(BACKENDS);
  });
  after(async () => {
    await gw.close();
  });

  it('no key is needed', async () => {
    const res = await chat(gw);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    const models = await fetch(`${gw.url}/v1/models`);
    assert.equal(models.status, 200);
    await models.arrayBuffer();
  });

  it('any Authorization header is ignored', async () => {
    const res = await chat(gw, { authorization: 'Bearer whatever', 'x-request-id': 'noauth-1' });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    const line = requestLog(gw, 'noauth-1');
    assert.ok(line);
    assert.equal(line.key, undefined);
    assert.ok(!gw.logs.join('').includes('whatever'));
  });
});
