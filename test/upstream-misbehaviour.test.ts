/**
 * An OpenAI-compatible upstream that misbehaves at the HTTP and SSE level (a small node:http server
 * of its own, not the shared fake): garbage with 200, wrong shapes, HTML, redirects, SSE written a
 * byte at a time, streams without `[DONE]`, stalls, oversized answers and resets mid-body. Each
 * gets the status and code the README documents, always as the OpenAI error envelope, and the
 * gateway keeps serving afterwards.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './support/gateway.ts';

const MAX_RESPONSE_BYTES = 64 * 1024;
const IDLE_MS = 400;

interface Upstream {
  url: string;
  server: http.Server;
  /** bytes written by the "huge" behaviour, and whether its socket was closed */
  huge: { written: number; closed: Promise<void> };
  close(): Promise<void>;
}

const sockets = new Set<Socket>();

function listen(server: http.Server): Promise<string> {
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

function chunk(delta: Record<string, unknown>, finish: string | null = null): string {
  return `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
}

const STREAM_TEXT = ['Hello', ', wörld', ' 🙂', ' — done'];
const SSE_BODY =
  chunk({ role: 'assistant', content: '' }) +
  STREAM_TEXT.map((t) => chunk({ content: t })).join('') +
  chunk({}, 'stop') +
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } })}\n\n` +
  'data: [DONE]\n\n';

const GOOD = JSON.stringify({
  id: 'x',
  object: 'chat.completion',
  created: 1,
  model: 'm',
  choices: [{ index: 0, message: { role: 'assistant', content: 'fine' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
});

async function startUpstream(redirectTarget: string): Promise<Upstream> {
  let resolveHugeClosed: () => void = () => {};
  const huge = { written: 0, closed: new Promise<void>((r) => (resolveHugeClosed = r)) };
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      let model = '';
      try {
        model = String((JSON.parse(Buffer.concat(parts).toString('utf8')) as { model?: unknown }).model);
      } catch {
        // not JSON: default behaviour
      }
      switch (model) {
        case 'garbage':
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(Buffer.from([0xff, 0xfe, 0x7b, 0x22, 0x00, 0xc3, 0x28, 0x5d, 0x5b, 0x0a]));
          return;
        case 'wrong-shape':
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ object: 'chat.completion', choices: 'nope', result: [1, 2, 3] }));
          return;
        case 'html':
          res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
          res.end('<!doctype html><html><body>Welcome to nginx!</body></html>');
          return;
        case 'redirect':
          res.writeHead(302, { location: `${redirectTarget}/v1/chat/completions`, 'content-type': 'text/html' });
          res.end('<a href="elsewhere">moved</a>');
          return;
        case 'bytewise': {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
          res.flushHeaders();
          const bytes = Buffer.from(SSE_BODY, 'utf8');
          let i = 0;
          const step = (): void => {
            if (res.destroyed) return;
            if (i >= bytes.length) {
              res.end();
              return;
            }
            res.write(bytes.subarray(i, i + 1));
            i++;
            setImmediate(step);
          };
          step();
          return;
        }
        case 'no-done':
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.end(chunk({ role: 'assistant', content: 'all' }) + chunk({ content: ' there' }) + chunk({}, 'stop'));
          return;
        case 'stall':
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(chunk({ role: 'assistant', content: 'partial' }));
          // …and nothing more, until the gateway gives up and closes the connection
          return;
        case 'huge': {
          // Chunked (no content-length), so the gateway must count while reading.
          res.writeHead(200, { 'content-type': 'application/json' });
          res.socket?.once('close', () => resolveHugeClosed());
          const piece = Buffer.alloc(16 * 1024, 0x20);
          res.write('{"choices":[],"pad":"');
          const pump = (): void => {
            while (!res.destroyed && huge.written < 64 * 1024 * 1024) {
              huge.written += piece.length;
              if (!res.write(piece)) {
                res.once('drain', pump);
                return;
              }
            }
            if (!res.destroyed) res.end('"}');
          };
          pump();
          return;
        }
        case 'huge-declared':
          // A content-length over the cap: refused before reading.
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(10 * MAX_RESPONSE_BYTES) });
          res.write(' '.repeat(1024));
          return;
        case 'reset':
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': '5000' });
          res.write('{"id":"x","object":"chat.completion","choices":[{"index":0,');
          setTimeout(() => res.socket?.resetAndDestroy(), 20);
          return;
        default:
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(GOOD);
      }
    });
  });
  const url = await listen(server);
  return { url: `${url}/v1`, server, huge, close: () => closeServer(server) };
}

const MODELS = ['garbage', 'wrong-shape', 'html', 'redirect', 'bytewise', 'no-done', 'stall', 'huge', 'huge-declared', 'reset', 'good'];

let upstream: Upstream;
let elsewhere: http.Server;
let elsewhereHits = 0;
let gw: TestGateway;

before(async () => {
  elsewhere = http.createServer((_req, res) => {
    elsewhereHits++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(GOOD);
  });
  const elsewhereUrl = await listen(elsewhere);
  upstream = await startUpstream(elsewhereUrl);
  gw = await startGateway(`
routing:
  retry: { max_retries: 0 }
  breaker: { consecutive_failures: 0, min_requests: 100000 }
backends:
  up: { type: openai, base_url: "${upstream.url}", api_key: sk-upstream-test, max_response_bytes: ${MAX_RESPONSE_BYTES}, stream_idle_timeout_ms: ${IDLE_MS}, timeout_ms: 10000 }
models:
${MODELS.map((m) => `  ${m}: { targets: [ { backend: up, model: ${m} } ] }`).join('\n')}
`);
});

after(async () => {
  await gw.close();
  await upstream.close();
  await closeServer(elsewhere);
});

interface Envelope {
  error: { message: string; type: string; param: string | null; code: string | null };
}

function assertEnvelope(value: unknown): asserts value is Envelope {
  assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), 'an object');
  assert.deepEqual(Object.keys(value), ['error']);
  const e = (value as { error: unknown }).error;
  assert.ok(typeof e === 'object' && e !== null);
  const err = e as Record<string, unknown>;
  assert.deepEqual(Object.keys(err).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(typeof err.message, 'string');
  assert.equal(typeof err.type, 'string');
  assert.ok(err.param === null || typeof err.param === 'string');
  assert.ok(err.code === null || typeof err.code === 'string');
  assert.doesNotMatch(String(err.message), /sk-upstream-test|<html|\n\s+at /i);
}

function chat(model: string, stream = false): Promise<Response> {
  return fetch(`${gw.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hi' }] }),
    signal: AbortSignal.timeout(15_000),
  });
}

async function expectError(model: string, status: number, code: string): Promise<Envelope> {
  const res = await chat(model);
  const text = await res.text();
  assert.equal(res.status, status, `status; body: ${text}`);
  assert.equal(res.headers.get('content-type'), 'application/json');
  const body: unknown = JSON.parse(text);
  assertEnvelope(body);
  assert.equal(body.error.code, code, `code; body: ${text}`);
  return body;
}

async function stillServes(): Promise<void> {
  const res = await chat('good');
  assert.equal(res.status, 200);
  const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
  assert.equal(body.choices[0]?.message.content, 'fine');
}

interface SseResult {
  events: unknown[];
  done: boolean;
  content: string;
}

async function readSse(res: Response): Promise<SseResult> {
  const text = await res.text();
  const events: unknown[] = [];
  let done = false;
  let content = '';
  for (const block of text.split('\n\n')) {
    const data = block
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart())
      .join('\n');
    if (data === '') continue;
    if (data === '[DONE]') {
      done = true;
      continue;
    }
    const ev: unknown = JSON.parse(data);
    events.push(ev);
    const c = (ev as { choices?: Array<{ delta?: { content?: unknown } }> }).choices?.[0]?.delta?.content;
    if (typeof c === 'string') content += c;
  }
  return { events, done, content };
}

describe('a misbehaving OpenAI upstream', () => {
  it('garbage bytes with 200 + application/json → 502 upstream_malformed_response', async () => {
    await expectError('garbage', 502, 'upstream_malformed_response');
    await stillServes();
  });

  it('JSON of the wrong shape → 502 upstream_malformed_response', async () => {
    await expectError('wrong-shape', 502, 'upstream_malformed_response');
    await stillServes();
  });

  it('200 with content-type text/html → 502 upstream_malformed_response', async () => {
    await expectError('html', 502, 'upstream_malformed_response');
    await stillServes();
  });

  it('a 302 redirect is not followed → 502', async () => {
    const before = elsewhereHits;
    await expectError('redirect', 502, 'upstream_error');
    assert.equal(elsewhereHits, before, 'the redirect target was never contacted');
    await stillServes();
  });

  it('SSE written one byte at a time → the same content and [DONE]', async () => {
    const res = await chat('bytewise', true);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const sse = await readSse(res);
    assert.equal(sse.content, STREAM_TEXT.join(''));
    assert.ok(sse.done, 'ends with [DONE]');
    assert.ok(!sse.events.some((e) => typeof e === 'object' && e !== null && 'error' in e), 'no error event');
    const finishes = sse.events.flatMap((e) => (e as { choices?: Array<{ finish_reason?: unknown }> }).choices?.map((c) => c.finish_reason) ?? []);
    assert.ok(finishes.includes('stop'));
    await stillServes();
  });

  it('SSE with a finish_reason but no [DONE], then a clean close → completes', async () => {
    const res = await chat('no-done', true);
    assert.equal(res.status, 200);
    const sse = await readSse(res);
    assert.equal(sse.content, 'all there');
    assert.ok(sse.done, 'the gateway ends the stream with [DONE] itself');
    assert.ok(!sse.events.some((e) => typeof e === 'object' && e !== null && 'error' in e), 'no error event');
    await stillServes();
  });

  it('SSE that stalls after content → an error event within stream_idle_timeout_ms, no [DONE]', async () => {
    const t0 = performance.now();
    const res = await chat('stall', true);
    assert.equal(res.status, 200);
    const sse = await readSse(res);
    const elapsed = performance.now() - t0;
    assert.equal(sse.content, 'partial');
    assert.equal(sse.done, false, 'no clean end that hides the loss');
    const last = sse.events.at(-1);
    assertEnvelope(last);
    assert.equal(last.error.code, 'upstream_timeout');
    assert.ok(elapsed < IDLE_MS + 2000, `ended after ${Math.round(elapsed)} ms`);
    await stillServes();
  });

  it('an answer over max_response_bytes (chunked) → 502 upstream_response_too_large, upstream socket closed', async () => {
    await expectError('huge', 502, 'upstream_response_too_large');
    await upstream.huge.closed;
    assert.ok(upstream.huge.written < 16 * 1024 * 1024, `upstream wrote only ${upstream.huge.written} bytes before the gateway hung up`);
    await stillServes();
  });

  it('a declared content-length over max_response_bytes → 502 upstream_response_too_large', async () => {
    await expectError('huge-declared', 502, 'upstream_response_too_large');
    await stillServes();
  });

  it('a connection reset mid-body → 502', async () => {
    const body = await expectError('reset', 502, 'upstream_unreachable');
    assert.match(body.error.message, /connection lost|ECONNRESET|UND_ERR/i);
    await stillServes();
  });
});
