/**
 * Bad input, end to end: every malformed, oversized or misrouted request gets a fitting status and
 * exactly the OpenAI error envelope as JSON (never HTML, plain text or a stack trace), carries an
 * `x-request-id`, and leaves the gateway serving the next good request.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startFakeOpenAI } from './support/fake-openai-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';

const LIMIT = 65536;
const YAML = `
server: { max_body_bytes: ${LIMIT} }
backends: { demo: { type: fake, embedding_dimensions: 8 } }
models:
  chat: { targets: [ { backend: demo, model: echo } ] }
`;
const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;
const GENERATED_ID = /^req_[0-9a-f]{32}$/;
const MSGS = [{ role: 'user', content: 'hi' }];

let gw: TestGateway;
before(async () => {
  gw = await startGateway(YAML);
});
after(async () => {
  await gw.close();
});

interface Expected {
  status: number;
  param?: string | null;
  code?: string | null;
  type?: string;
  message?: RegExp;
}

/** Checks the exact envelope shape and returns the parsed error. */
function checkEnvelope(status: number, headers: Record<string, string | undefined>, text: string, want: Expected): void {
  assert.equal(status, want.status, `status; body: ${text}`);
  assert.equal(headers['content-type'], 'application/json', `content-type; body: ${text}`);
  const rid = headers['x-request-id'];
  assert.ok(rid !== undefined && REQUEST_ID.test(rid), `x-request-id: ${String(rid)}`);
  assert.doesNotMatch(text, /<html|<!doctype|\n\s+at |\.ts:\d+|node_modules/i, 'no HTML, no stack trace');
  const body: unknown = JSON.parse(text);
  assert.ok(typeof body === 'object' && body !== null && !Array.isArray(body));
  assert.deepEqual(Object.keys(body), ['error']);
  const err = (body as { error: unknown }).error;
  assert.ok(typeof err === 'object' && err !== null && !Array.isArray(err));
  const e = err as Record<string, unknown>;
  assert.deepEqual(Object.keys(e).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(typeof e.message, 'string');
  assert.ok((e.message as string).length > 0);
  assert.equal(typeof e.type, 'string');
  assert.ok(e.param === null || typeof e.param === 'string', `param: ${String(e.param)}`);
  assert.ok(e.code === null || typeof e.code === 'string', `code: ${String(e.code)}`);
  assert.equal(e.type, want.type ?? 'invalid_request_error');
  if (want.param !== undefined) assert.equal(e.param, want.param, `param; message: ${String(e.message)}`);
  if (want.code !== undefined) assert.equal(e.code, want.code);
  if (want.message) assert.match(e.message as string, want.message);
}

async function expectError(res: Response, want: Expected): Promise<void> {
  const headers: Record<string, string | undefined> = {};
  res.headers.forEach((v, k) => (headers[k] = v));
  checkEnvelope(res.status, headers, await res.text(), want);
}

function post(path: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(gw.url + path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
}

const postJson = (path: string, body: unknown): Promise<Response> => post(path, JSON.stringify(body));

/** The gateway still answers a good request correctly. */
async function stillServes(): Promise<void> {
  const res = await postJson('/v1/chat/completions', { model: 'chat', messages: [{ role: 'user', content: 'ping' }] });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
  assert.equal(body.choices[0]?.message.content, 'echo: ping');
}

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** resolves when the server closes or ends the connection */
  closed: Promise<void>;
}

/** Sends `head` (and optional body bytes) on a raw socket and reads one response. */
function rawRequest(head: string, body?: Buffer): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(gw.running.port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let done = false;
    const closed = new Promise<void>((r) => sock.once('close', () => r()));
    sock.on('error', () => {
      // a reset after the response is fine; before it, the 'close' handler reports it
    });
    sock.once('connect', () => {
      sock.write(head);
      if (body) sock.write(body);
    });
    const tryParse = (): void => {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0] ?? '')?.[1]);
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      const len = Number(headers['content-length']);
      const rest = buf.subarray(end + 4);
      if (!Number.isFinite(len) || rest.length < len) return;
      done = true;
      resolve({ status, headers, body: rest.subarray(0, len).toString('utf8'), closed });
    };
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (!done) tryParse();
    });
    sock.once('close', () => {
      if (!done) reject(new Error(`connection closed before a full response: ${JSON.stringify(buf.toString('latin1'))}`));
    });
  });
}

const within = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([p, new Promise<T>((_, rej) => setTimeout(() => rej(new Error(`timed out: ${what}`)), ms).unref())]);

describe('bad input: malformed bodies', () => {
  it('malformed JSON → 400', async () => {
    await expectError(await post('/v1/chat/completions', '{"model": "chat", "messages": ['), {
      status: 400,
      param: null,
      message: /parse the JSON body/,
    });
    await stillServes();
  });

  it('empty body → 400', async () => {
    await expectError(await post('/v1/chat/completions', ''), { status: 400, param: null, message: /empty/ });
    await expectError(await fetch(`${gw.url}/v1/embeddings`, { method: 'POST' }), { status: 400, param: null, message: /empty/ });
    await stillServes();
  });

  for (const [name, text] of [
    ['an array', '[{"model":"chat"}]'],
    ['a string', '"hello"'],
    ['null', 'null'],
    ['a number', '42'],
  ] as const) {
    it(`JSON that is ${name}, not an object → 400`, async () => {
      await expectError(await post('/v1/chat/completions', text), { status: 400, param: null, message: /must be a JSON object/ });
      await stillServes();
    });
  }

  it('invalid UTF-8 bytes → 400', async () => {
    for (const bad of [Buffer.from([0xff, 0xfe]), Buffer.from([0xc0, 0xaf]), Buffer.from([0xe6, 0x97])]) {
      const body = Buffer.concat([Buffer.from('{"model":"chat","messages":[{"role":"user","content":"a'), bad, Buffer.from('b"}]}')]);
      await expectError(await post('/v1/chat/completions', body), { status: 400, param: null, message: /UTF-8/ });
    }
    await stillServes();
  });

  it('valid multi-byte UTF-8 split across chunks is decoded intact', async () => {
    const text = 'héllo 日本 🎉';
    const bytes = Buffer.from(JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: text }] }));
    const cut = bytes.indexOf(Buffer.from('🎉')) + 2; // in the middle of the 4-byte emoji
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: gw.running.port, method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' } },
        (r) => {
          let b = '';
          r.setEncoding('utf8');
          r.on('data', (d: string) => (b += d));
          r.on('end', () => resolve({ status: r.statusCode ?? 0, body: b }));
        },
      );
      req.on('error', reject);
      req.write(bytes.subarray(0, cut));
      setTimeout(() => req.end(bytes.subarray(cut)), 20);
    });
    assert.equal(res.status, 200, res.body);
    const body = JSON.parse(res.body) as { choices: Array<{ message: { content: string } }> };
    assert.equal(body.choices[0]?.message.content, `echo: ${text}`);
  });

  it('deeply nested JSON does not crash: 400 past the depth limit', async () => {
    const depth = 10_000;
    const deep = /nested deeper than 256 levels/;
    const arrays = `{"model":"chat","messages":[{"role":"user","content":"deep"}],"x_vendor":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    await expectError(await post('/v1/chat/completions', arrays), { status: 400, param: null, message: deep });
    await stillServes();
    const objects = `{"model":"chat","messages":[{"role":"user","content":"deep"}],"x_vendor":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;
    await expectError(await post('/v1/chat/completions', objects), { status: 400, param: null, message: deep });
    const inContent = `{"model":"chat","messages":[{"role":"user","content":${'['.repeat(depth)}${']'.repeat(depth)}}]}`;
    await expectError(await post('/v1/chat/completions', inContent), { status: 400, param: null, message: deep });
    const embed = `{"model":"chat","input":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    await expectError(await post('/v1/embeddings', embed), { status: 400, param: null, message: deep });
    await stillServes();
  });

  /** A chat body whose deepest container is at `depth` (the body object itself is depth 1). */
  const nested = (depth: number): string =>
    `{"model":"chat","messages":[{"role":"user","content":"deep"}],"x_vendor":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;

  it('nesting up to the limit (256) passes through; one level more is refused', async () => {
    const ok = await post('/v1/chat/completions', nested(256));
    assert.equal(ok.status, 200);
    assert.equal(((await ok.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content, 'echo: deep');
    await expectError(await post('/v1/chat/completions', nested(257)), { status: 400, param: null, message: /256/ });
  });

  it('the shortest body nested one level too deep (514 bytes) is refused: short bodies skip the walk only when they cannot be that deep', async () => {
    const shortest = `${'['.repeat(257)}${']'.repeat(257)}`;
    assert.equal(shortest.length, 514);
    await expectError(await post('/v1/chat/completions', shortest), { status: 400, param: null, message: /nested deeper than 256 levels/ });
  });

  it('through an openai backend: deep nesting is a 400 at the edge, not an upstream failure', async () => {
    const up = await startFakeOpenAI();
    const gw2 = await startGateway(`
server: { max_body_bytes: ${LIMIT} }
backends: { up: { type: openai, base_url: "${up.url}", api_key: sk-upstream-test } }
models:
  chat: { targets: [ { backend: up, model: gpt-up } ] }
`);
    try {
      const send = (body: string): Promise<Response> =>
        fetch(`${gw2.url}/v1/chat/completions`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
      const ok = await send(nested(256));
      assert.equal(ok.status, 200, await ok.clone().text());
      await ok.arrayBuffer();
      assert.equal(up.requests.length, 1, 'the limit leaves room to serialise the body for the upstream');
      const res = await send(nested(10_000));
      await expectError(res, { status: 400, param: null, message: /nested deeper/ });
      assert.equal(up.requests.length, 1, 'the upstream is not called');
    } finally {
      await gw2.close();
      await up.close();
    }
  });
});

describe('bad input: schema violations name the param', () => {
  const chatCases: Array<{ name: string; body: Record<string, unknown>; param: string; message?: RegExp }> = [
    { name: 'missing model', body: { messages: MSGS }, param: 'model', message: /'model'/ },
    { name: 'missing messages', body: { model: 'chat' }, param: 'messages', message: /'messages'.*expected array/ },
    { name: 'temperature: "hot"', body: { model: 'chat', messages: MSGS, temperature: 'hot' }, param: 'temperature', message: /expected number/ },
    { name: 'temperature out of range', body: { model: 'chat', messages: MSGS, temperature: 3 }, param: 'temperature' },
    { name: 'messages: "hi"', body: { model: 'chat', messages: 'hi' }, param: 'messages', message: /expected array/ },
    { name: 'stream: "yes"', body: { model: 'chat', messages: MSGS, stream: 'yes' }, param: 'stream', message: /expected boolean/ },
    { name: 'max_tokens: -1', body: { model: 'chat', messages: MSGS, max_tokens: -1 }, param: 'max_tokens', message: />=\s?1/ },
    { name: 'n: 1.5', body: { model: 'chat', messages: MSGS, n: 1.5 }, param: 'n', message: /int/ },
    { name: 'content: 5', body: { model: 'chat', messages: [{ role: 'user', content: 5 }] }, param: 'messages[0].content', message: /expected string or array/ },
    { name: 'empty messages', body: { model: 'chat', messages: [] }, param: 'messages', message: />=\s?1/ },
    {
      name: 'unknown role',
      body: { model: 'chat', messages: [...MSGS, { role: 'wizard', content: 'x' }] },
      param: 'messages[1].role',
      message: /'user'/,
    },
    {
      name: 'unknown content part type',
      body: { model: 'chat', messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'video', video: {} }] }] },
      param: 'messages[0].content[1].type',
      message: /image_url/,
    },
    {
      name: 'tool message without tool_call_id',
      body: { model: 'chat', messages: [...MSGS, { role: 'tool', content: 'result' }] },
      param: 'messages[1].tool_call_id',
      message: /expected string/,
    },
  ];
  for (const c of chatCases) {
    it(`chat: ${c.name} → 400 param ${c.param}`, async () => {
      await expectError(await postJson('/v1/chat/completions', c.body), { status: 400, param: c.param, code: null, ...(c.message ? { message: c.message } : {}) });
      await stillServes();
    });
  }

  const embedCases: Array<{ name: string; body: Record<string, unknown>; param: string; message?: RegExp }> = [
    { name: 'empty string input', body: { model: 'chat', input: '' }, param: 'input', message: /empty/ },
    { name: 'empty array input', body: { model: 'chat', input: [] }, param: 'input', message: />=\s?1/ },
    { name: 'empty string inside the array', body: { model: 'chat', input: ['a', ''] }, param: 'input[1]' },
    { name: 'encoding_format: "hex"', body: { model: 'chat', input: 'x', encoding_format: 'hex' }, param: 'encoding_format', message: /base64/ },
    { name: 'dimensions: 0', body: { model: 'chat', input: 'x', dimensions: 0 }, param: 'dimensions' },
    { name: 'missing input', body: { model: 'chat' }, param: 'input' },
  ];
  for (const c of embedCases) {
    it(`embeddings: ${c.name} → 400 param ${c.param}`, async () => {
      await expectError(await postJson('/v1/embeddings', c.body), { status: 400, param: c.param, ...(c.message ? { message: c.message } : {}) });
      await stillServes();
    });
  }

  it('completions: missing prompt → 400 param prompt', async () => {
    await expectError(await postJson('/v1/completions', { model: 'chat' }), { status: 400, param: 'prompt' });
    await stillServes();
  });
});

describe('bad input: unknown things', () => {
  it('unknown model → 404 model_not_found, param model', async () => {
    await expectError(await postJson('/v1/chat/completions', { model: 'gpt-nope', messages: MSGS }), {
      status: 404,
      param: 'model',
      code: 'model_not_found',
      message: /gpt-nope/,
    });
    await expectError(await postJson('/v1/embeddings', { model: 'gpt-nope', input: 'x' }), { status: 404, param: 'model', code: 'model_not_found' });
    await expectError(await fetch(`${gw.url}/v1/models/gpt-nope`), { status: 404, param: 'model', code: 'model_not_found' });
    await stillServes();
  });

  it('unknown route → 404 unknown_url', async () => {
    await expectError(await postJson('/v1/chat/complete', { model: 'chat', messages: MSGS }), { status: 404, param: null, code: 'unknown_url', message: /\/v1\/chat\/complete/ });
    await expectError(await fetch(`${gw.url}/nope`), { status: 404, code: 'unknown_url' });
    await expectError(await fetch(`${gw.url}/v2/models`), { status: 404, code: 'unknown_url' });
    await stillServes();
  });

  it('wrong method → 405 with allow', async () => {
    let res = await fetch(`${gw.url}/v1/chat/completions`);
    assert.equal(res.headers.get('allow'), 'POST');
    await expectError(res, { status: 405, param: null, code: 'method_not_allowed' });
    res = await fetch(`${gw.url}/v1/embeddings`, { method: 'DELETE' });
    assert.equal(res.headers.get('allow'), 'POST');
    await expectError(res, { status: 405, code: 'method_not_allowed' });
    res = await fetch(`${gw.url}/v1/models`, { method: 'POST', body: '{}' });
    assert.equal(res.headers.get('allow'), 'GET');
    await expectError(res, { status: 405, code: 'method_not_allowed' });
    await stillServes();
  });
});

describe('bad input: body size limit', () => {
  it('a body of exactly max_body_bytes is accepted', async () => {
    const base = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'fits' }] });
    const body = base.slice(0, -1) + ' '.repeat(LIMIT - base.length) + '}';
    assert.equal(Buffer.byteLength(body), LIMIT);
    const res = await post('/v1/chat/completions', body);
    assert.equal(res.status, 200);
    await res.arrayBuffer();
  });

  it('honest content-length over the limit → 413 before any body is sent', async () => {
    for (const declared of [LIMIT + 1, 50 * 1024 * 1024]) {
      const head = `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${declared}\r\n\r\n`;
      // only the headers and a few body bytes go out: the answer cannot depend on reading the body
      const r = await within(rawRequest(head, Buffer.from('{"model":')), 5000, '413 response');
      checkEnvelope(r.status, r.headers, r.body, { status: 413, param: null, code: 'request_too_large', message: new RegExp(String(LIMIT)) });
      assert.equal(r.headers.connection, 'close');
      await within(r.closed, 5000, 'server closes the connection');
    }
    await stillServes();
  });

  it('a chunked body sent in one piece with its head: read whole under the limit, 413 over it', async () => {
    const head = 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n';
    const chunked = (s: string): string => `${Buffer.byteLength(s).toString(16)}\r\n${s}\r\n0\r\n\r\n`;
    const ok = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'sent in one piece' }] });
    const good = await within(rawRequest(head + chunked(ok)), 5000, '200 response');
    assert.equal(good.status, 200);
    assert.match(good.body, /sent in one piece/);
    const big = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'a'.repeat(LIMIT) }] });
    const r = await within(rawRequest(head + chunked(big)), 5000, '413 response');
    checkEnvelope(r.status, r.headers, r.body, { status: 413, param: null, code: 'request_too_large', message: new RegExp(String(LIMIT)) });
    assert.equal(r.headers.connection, 'close');
    await stillServes();
  });

  it('chunked body over the limit → 413 while the client is still sending', async () => {
    const cap = 64 * 1024 * 1024;
    const r = await within(
      new Promise<{ status: number; headers: Record<string, string | undefined>; body: string; sent: number; endedBeforeResponse: boolean }>((resolve, reject) => {
        const req = http.request({
          host: '127.0.0.1',
          port: gw.running.port,
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        });
        let sent = 0;
        let got = false;
        let ended = false;
        req.on('response', (res) => {
          got = true;
          let b = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (b += d));
          res.on('end', () => {
            const headers: Record<string, string | undefined> = {};
            for (const [k, v] of Object.entries(res.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : v;
            resolve({ status: res.statusCode ?? 0, headers, body: b, sent, endedBeforeResponse: ended });
            req.destroy();
          });
        });
        req.on('error', (e) => {
          if (!got) reject(e);
        });
        const chunk = Buffer.alloc(16 * 1024, 0x61);
        const pump = (): void => {
          while (!got && sent < cap) {
            sent += chunk.length;
            if (!req.write(chunk)) {
              req.once('drain', pump);
              return;
            }
          }
          if (!got) {
            ended = true;
            req.end('"}');
          }
        };
        req.write('{"model":"chat","messages":[{"role":"user","content":"');
        pump();
      }),
      10_000,
      'chunked 413',
    );
    checkEnvelope(r.status, r.headers, r.body, { status: 413, param: null, code: 'request_too_large' });
    assert.equal(r.endedBeforeResponse, false, `the gateway read the whole ${r.sent}-byte body before answering`);
    assert.ok(r.sent < cap, `sent ${r.sent}`);
    await stillServes();
  });
});

describe('x-request-id', () => {
  it("echoes the client's id on success and on errors", async () => {
    let res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'client-req.42:a@b_c' },
      body: JSON.stringify({ model: 'chat', messages: MSGS }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-request-id'), 'client-req.42:a@b_c');
    await res.arrayBuffer();
    res = await fetch(`${gw.url}/v1/nope`, { headers: { 'x-request-id': 'client-req-404' } });
    assert.equal(res.headers.get('x-request-id'), 'client-req-404');
    await expectError(res, { status: 404, code: 'unknown_url' });
    res = await post('/v1/chat/completions', '{', { 'x-request-id': 'client-req-400' });
    assert.equal(res.headers.get('x-request-id'), 'client-req-400');
    await expectError(res, { status: 400 });
    const line = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'request' && l.request_id === 'client-req-400');
    assert.ok(line, 'the log line carries the same request id');
    assert.equal(line.status, 400);
  });

  it('accepts an id of exactly 128 characters', async () => {
    const id = 'a'.repeat(128);
    const res = await fetch(`${gw.url}/health`, { headers: { 'x-request-id': id } });
    assert.equal(res.headers.get('x-request-id'), id);
  });

  for (const [name, bad] of [
    ['too long', 'a'.repeat(129)],
    ['with spaces', 'has spaces in it'],
    ['with a quote', 'a"b'],
    ['with % and <', '%E2%9C%93<script>'],
  ] as const) {
    it(`replaces an invalid id (${name}) with a generated one`, async () => {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': bad },
        body: JSON.stringify({ model: 'chat', messages: MSGS }),
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      const id = res.headers.get('x-request-id');
      assert.notEqual(id, bad);
      assert.match(id ?? '', GENERATED_ID);
    });
  }

  it('every response has an id, and generated ids are unique', async () => {
    const ids = new Set<string>();
    const responses = await Promise.all([
      fetch(`${gw.url}/health`),
      fetch(`${gw.url}/ready`),
      fetch(`${gw.url}/v1/models`),
      fetch(`${gw.url}/v1/chat/completions`),
      fetch(`${gw.url}/nothing/here`),
      post('/v1/chat/completions', '[]'),
      postJson('/v1/embeddings', { model: 'chat', input: 'x' }),
      postJson('/v1/chat/completions', { model: 'chat', messages: MSGS, stream: true }),
    ]);
    for (const res of responses) {
      const id = res.headers.get('x-request-id');
      assert.match(id ?? '', GENERATED_ID, `${res.url} ${res.status}`);
      ids.add(id ?? '');
      await res.arrayBuffer();
    }
    assert.equal(ids.size, responses.length);
  });
});
