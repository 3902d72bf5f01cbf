/**
 * UpstreamClient against a local node:http upstream: what goes on the wire, how each kind of
 * answer (JSON, SSE, errors, garbage, oversize, drops, aborts) comes back, and that every path
 * gives its connection back to the pool or closes it.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { GatewayError } from '../../errors/gateway-error.ts';
import { ChunkPart } from '../../protocol/stream-part.ts';
import { llamaSseFraming } from '../llamacpp/sse.ts';
import { UpstreamClient } from './client.ts';
import type { UpstreamClientOptions, StatusErrorInfo } from './types.ts';

const KEY = 'sk-unit-test-secret-key-0001';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

interface Seen {
  headers: IncomingMessage['headers'];
  path: string;
  body: string;
}

let server: Server;
let base = '';
let handler: Handler = (_req, res) => res.end('{}');
const seen: Seen[] = [];
const sockets = new Set<Socket>();
let connections = 0;
let closedByClient = 0;

before(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      seen.push({ headers: req.headers, path: req.url ?? '', body });
      handler(req, res, body);
    });
  });
  server.on('connection', (s: Socket) => {
    connections++;
    sockets.add(s);
    s.on('close', () => {
      sockets.delete(s);
      closedByClient++;
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

after(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});

beforeEach(() => {
  seen.length = 0;
});

function client(extra: Partial<UpstreamClientOptions> = {}): { http: UpstreamClient; agent: Agent } {
  const agent = new Agent({ connections: 4, keepAliveTimeout: 10_000 });
  const http = new UpstreamClient({
    backend: 'up',
    baseUrl: base,
    dispatcher: agent,
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'X-Extra': 'yes' },
    secrets: [KEY],
    maxResponseBytes: 4096,
    ...extra,
  });
  return { http, agent };
}

const signal = (): AbortSignal => new AbortController().signal;

async function rejectsWith(p: Promise<unknown>, code: string, status = 502): Promise<GatewayError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof GatewayError, `not a GatewayError: ${String(err)}`);
    assert.equal(err.code, code, err.message);
    assert.equal(err.status, status);
    assert.ok(!err.message.includes(KEY), 'the key never shows');
    return err;
  }
  assert.fail(`expected ${code}`);
}

/** The chunks of a stream's parts. */
async function collect(it: AsyncIterable<ChunkPart<object>>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const v of it) out.push(v.chunk);
  return out;
}

/** The next result of a stream of parts, with its part's chunk as the value. */
async function nextChunk(it: AsyncIterator<ChunkPart<object>>): Promise<IteratorResult<unknown>> {
  const r = await it.next();
  return r.done ? r : { done: false, value: r.value.chunk };
}

function sse(res: ServerResponse, parts: string[], end = true): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  for (const p of parts) res.write(p);
  if (end) res.end();
}

const chunk = (n: number): string => `data: {"n":${n}}\n\n`;

describe('UpstreamClient: JSON', () => {
  test('sends the body once serialised, with the static and per-call headers; answers the parsed JSON', async () => {
    const { http, agent } = client();
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end('{"ok":true}');
    };
    const r = await http.postJson('/chat/completions', { model: 'm', extra: [1, 2] }, { signal: signal(), headers: { 'x-request-id': 'rid-1' } });
    assert.deepEqual(r, { ok: true });
    const s = seen[0];
    assert.ok(s);
    assert.equal(s.path, '/v1/chat/completions');
    assert.equal(s.body, '{"model":"m","extra":[1,2]}');
    assert.equal(s.headers.authorization, `Bearer ${KEY}`);
    assert.equal(s.headers['content-type'], 'application/json');
    assert.equal(s.headers.accept, 'application/json');
    assert.equal(s.headers['x-extra'], 'yes');
    assert.equal(s.headers['x-request-id'], 'rid-1');
    assert.equal(s.headers['accept-encoding'], 'identity');
    await agent.close();
  });

  test("a call's header replaces the backend's header of the same name (one value, any case), on JSON and stream calls", async () => {
    const { http, agent } = client();
    handler = (req, res) => {
      if (req.headers.accept === 'text/event-stream') return sse(res, ['data: [DONE]\n\n']);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    };
    await http.postJson('/x', {}, { signal: signal(), headers: { 'X-EXTRA': 'call', 'x-request-id': 'r1' } });
    await collect(await http.postStream('/x', {}, { signal: signal(), headers: { 'x-extra': 'call2', Accept: 'text/event-stream' } }));
    assert.equal(seen[0]?.headers['x-extra'], 'call');
    assert.equal(seen[0]?.headers['x-request-id'], 'r1');
    assert.equal(seen[1]?.headers['x-extra'], 'call2');
    assert.equal(seen[1]?.headers.accept, 'text/event-stream');
    assert.equal(seen[1]?.headers.authorization, `Bearer ${KEY}`);
    await agent.close();
  });

  test('keeps the connection alive across calls', async () => {
    const { http, agent } = client();
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"a":1}');
    };
    const before = connections;
    for (let i = 0; i < 10; i++) await http.postJson('/x', {}, { signal: signal() });
    // (the pool may open a second connection while the first is being released)
    assert.ok(connections - before <= 2, `${connections - before} connections for 10 calls`);
    await agent.close();
  });

  test('non-2xx: the error envelope and retry-after go through the status mapping', async () => {
    const { http, agent } = client();
    handler = (_req, res) => {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '1500' });
      res.end(JSON.stringify({ error: { message: `slow down ${KEY}`, type: 'requests', code: 'rate_limit_exceeded' } }));
    };
    const e = await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'rate_limit_exceeded', 429);
    assert.equal(e.retryAfter, 1.5);
    assert.match(e.message, /slow down \[redacted\]/);
    await agent.close();
  });

  test('non-2xx statuses map as the SDK path did', async () => {
    const { http, agent } = client();
    const table: Array<[number, number, string | null]> = [
      [400, 400, null],
      [401, 502, 'upstream_auth_failed'],
      [404, 404, 'model_not_found'],
      [500, 502, 'upstream_error'],
      [503, 503, 'upstream_unavailable'],
      [504, 504, 'upstream_timeout'],
    ];
    for (const [up, status, code] of table) {
      handler = (_req, res) => {
        res.writeHead(up, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'nope', type: 'x', code: null } }));
      };
      try {
        await http.postJson('/x', {}, { signal: signal() });
        assert.fail('should throw');
      } catch (err) {
        assert.ok(err instanceof GatewayError);
        assert.equal(err.status, status, `upstream ${up}`);
        assert.equal(err.code, code, `upstream ${up}`);
      }
    }
    await agent.close();
  });

  test('a non-JSON error body reaches the status hook as text, capped at 1 MiB', async () => {
    let got: StatusErrorInfo | undefined;
    const { http, agent } = client({
      statusError: (info) => {
        got = info;
        return new GatewayError('upstream_error', 'mapped', { wireCode: 'mapped' });
      },
    });
    handler = (_req, res) => {
      res.writeHead(500, { 'content-type': 'text/html' });
      res.end('<html>bad gateway</html>');
    };
    await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'mapped');
    assert.equal(got?.status, 500);
    assert.equal(got?.bodyText, '<html>bad gateway</html>');
    assert.equal(got?.error, undefined);
    handler = (_req, res) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end('x'.repeat(3 * 1024 * 1024));
    };
    await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'mapped');
    assert.equal(got?.bodyText?.length, 1024 * 1024);
    await agent.close();
  });

  test('garbage with 200: invalid JSON, or not JSON at all → upstream_malformed_response', async () => {
    const { http, agent } = client();
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"choices": [');
    };
    await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'upstream_malformed_response');
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>login</html>');
    };
    await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'upstream_malformed_response');
    await agent.close();
  });

  test('a compressed body despite accept-encoding: identity → upstream_malformed_response', async () => {
    const { http, agent } = client();
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      res.end(Buffer.from([0x1f, 0x8b, 0x08, 0x00]));
    };
    const e = await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'upstream_malformed_response');
    assert.match(e.message, /content-encoding "gzip"/);
    await agent.close();
  });

  test('a body over maxResponseBytes → upstream_response_too_large, with or without content-length', async () => {
    const { http, agent } = client();
    const big = JSON.stringify({ pad: 'x'.repeat(10_000) });
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(big) });
      res.end(big);
    };
    await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'upstream_response_too_large');
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      for (let i = 0; i < 10; i++) res.write('x'.repeat(1000));
      res.end();
    };
    await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'upstream_response_too_large');
    await agent.close();
  });

  test('connection refused → upstream_unreachable naming the code', async () => {
    const agent = new Agent();
    const http = new UpstreamClient({ backend: 'dead', baseUrl: 'http://127.0.0.1:1/v1', dispatcher: agent, headers: {}, secrets: [], maxResponseBytes: 1000 });
    const e = await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'upstream_unreachable');
    assert.match(e.message, /ECONNREFUSED/);
    await agent.close();
  });

  test('a connection dropped mid-body → upstream_unreachable (connection lost)', async () => {
    const { http, agent } = client();
    handler = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"a":');
      setTimeout(() => req.socket.destroy(), 10);
    };
    const e = await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'upstream_unreachable');
    assert.match(e.message, /connection lost/);
    await agent.close();
  });

  test('a large body of a known length (copied as it arrives) comes whole however it is split; cut short or aborted, it fails as a small one does', async () => {
    const { http, agent } = client({ maxResponseBytes: 1 << 20 });
    const value = { data: Array.from({ length: 40 }, (_, i) => ({ index: i, pad: `${i}`.repeat(5000) })) };
    const big = Buffer.from(JSON.stringify(value));
    assert.ok(big.length > 128 * 1024);
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': big.length });
      let at = 0;
      const next = (): void => {
        const end = Math.min(big.length, at + 50_000);
        res.write(big.subarray(at, end));
        at = end;
        if (at < big.length) setTimeout(next, 2);
        else res.end();
      };
      next();
    };
    assert.deepEqual(await http.postJson('/x', {}, { signal: signal() }), value);
    handler = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': big.length });
      res.write(big.subarray(0, 100_000));
      setTimeout(() => req.socket.destroy(), 10);
    };
    assert.match((await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'upstream_unreachable')).message, /connection lost/);
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': big.length });
      res.write(big.subarray(0, 100_000));
    };
    const ac = new AbortController();
    const reason = new DOMException('attempt deadline', 'TimeoutError');
    setTimeout(() => ac.abort(reason), 30);
    await assert.rejects(http.postJson('/x', {}, { signal: ac.signal }), (err: unknown) => err === reason);
    await agent.close();
  });

  test('a small body comes whole however it is split, with a content-length or chunked; an empty one is malformed, and the connection is kept', async () => {
    const { http, agent } = client();
    const text = '{"choices":[{"index":0,"message":{"role":"assistant","content":"héllo ✓"}}]}';
    const bytes = Buffer.from(text);
    const parts = [bytes.subarray(0, 7), bytes.subarray(7, 61), bytes.subarray(61)]; // 61: inside "✓"
    for (const withLength of [true, false]) {
      handler = (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', ...(withLength ? { 'content-length': bytes.length } : {}) });
        let i = 0;
        const next = (): void => {
          const p = parts[i++];
          if (p === undefined) return void res.end();
          res.write(p);
          setTimeout(next, 5);
        };
        next();
      };
      assert.deepEqual(await http.postJson('/x', {}, { signal: signal() }), JSON.parse(text));
      assert.equal((await http.postForBytes('/x', {}, { signal: signal() })).toString('utf8'), text);
    }
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '0' });
      res.end();
    };
    await rejectsWith(http.postJson('/x', {}, { signal: signal() }), 'upstream_malformed_response');
    const before = connections;
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":1}');
    };
    for (let i = 0; i < 5; i++) await http.postJson('/x', {}, { signal: signal() });
    assert.ok(connections - before <= 1, `${connections - before} new connections for 5 calls`);
    await agent.close();
  });

  test('an abort is rethrown as the signal’s reason, before or after the headers', async () => {
    const { http, agent } = client();
    handler = () => {}; // never answers
    const ac = new AbortController();
    const reason = new DOMException('attempt deadline', 'TimeoutError');
    setTimeout(() => ac.abort(reason), 20);
    await assert.rejects(http.postJson('/x', {}, { signal: ac.signal }), (err: unknown) => err === reason);
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"a":');
    };
    const ac2 = new AbortController();
    setTimeout(() => ac2.abort(reason), 20);
    await assert.rejects(http.postJson('/x', {}, { signal: ac2.signal }), (err: unknown) => err === reason);
    await agent.close();
  });
});

describe('UpstreamClient: SSE', () => {
  test('yields parsed data payloads however the bytes are split; comments skipped; [DONE] ends; the socket is reused', async () => {
    const { http, agent } = client();
    const text = `: ping\n\n${chunk(1)}${chunk(2)}data: {"multi":\ndata: "line"}\n\n${chunk(3)}data: [DONE]\n\n`;
    handler = (_req, res) => sse(res, [text.slice(0, 7), text.slice(7, 20), text.slice(20, 21), text.slice(21)]);
    const before = connections;
    for (let i = 0; i < 10; i++) {
      const it = await http.postStream('/chat/completions', { stream: true }, { signal: signal(), headers: { 'x-request-id': 'r' } });
      assert.deepEqual(await collect(it), [{ n: 1 }, { n: 2 }, { multi: 'line' }, { n: 3 }]);
    }
    assert.ok(connections - before <= 2, `${connections - before} connections for 10 streams: they are kept alive`);
    assert.equal(seen[0]?.headers.accept, 'text/event-stream');
    await agent.close();
  });

  test('multi-byte characters split across reads survive', async () => {
    const { http, agent } = client();
    const bytes = Buffer.from('data: {"t":"héllo ☃ 🎉"}\n\ndata: [DONE]\n\n');
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let i = 0; i < bytes.length; i++) res.write(bytes.subarray(i, i + 1));
      res.end();
    };
    assert.deepEqual(await collect(await http.postStream('/x', {}, { signal: signal() })), [{ t: 'héllo ☃ 🎉' }]);
    await agent.close();
  });

  test('a stream that ends without [DONE] just ends (a last event without its blank line counts)', async () => {
    const { http, agent } = client();
    handler = (_req, res) => sse(res, [chunk(1), 'data: {"n":2}']);
    assert.deepEqual(await collect(await http.postStream('/x', {}, { signal: signal() })), [{ n: 1 }, { n: 2 }]);
    await agent.close();
  });

  test('data: {"error":…} after chunks: the chunks first, then upstream_stream_error (key redacted)', async () => {
    const { http, agent } = client();
    handler = (_req, res) => sse(res, [chunk(1) + `data: {"error":{"message":"overloaded ${KEY}","type":"server_error"}}\n\n` + chunk(2)]);
    const it = await http.postStream('/x', {}, { signal: signal() });
    assert.deepEqual(await nextChunk(it), { done: false, value: { n: 1 } });
    const e = await rejectsWith(it.next(), 'upstream_stream_error');
    assert.match(e.message, /overloaded \[redacted\]/);
    assert.equal(e.retryable, true);
    await agent.close();
  });

  test('content tokens and the finish come as plain parts of the text they were sent in; usage and errors are parsed and checked', async () => {
    const { http, agent } = client();
    const content = (t: string): string => `{"id":"c","choices":[{"index":0,"delta":{"content":"${t}"},"finish_reason":null}],"usage":null}`;
    const finish = '{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}';
    const usage = '{"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}';
    const events = [content('a'), content('b'), content('c \\"q\\"'), finish, usage];
    handler = (_req, res) => sse(res, [`${events.map((d) => `data: ${d}\n\n`).join('')}data: [DONE]\n\n`]);
    const it = await http.postStream('/x', {}, { signal: signal() });
    const parts: ChunkPart<object>[] = [];
    for await (const p of it) parts.push(p);
    assert.deepEqual(
      parts.map((p) => (p.plain ? (p.finishes ? 'finish' : 'plain') : 'parsed')),
      ['plain', 'plain', 'plain', 'finish', 'parsed'],
    );
    assert.deepEqual(
      parts.map((p) => p.json()),
      events,
    );
    assert.deepEqual(
      parts.map((p) => p.chunk),
      events.map((e) => JSON.parse(e) as unknown),
    );
    await agent.close();
  });

  test('between plain parts an error event, or an event that is not JSON, is still raised', async () => {
    const { http, agent } = client();
    const content = '{"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}';
    for (const [bad, code] of [
      ['{"error":{"message":"overloaded","type":"server_error"}}', 'upstream_stream_error'],
      ['{"id":"c","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]', 'upstream_malformed_response'],
      ['{"id":"c","choices":[{"index":0,"delta":{"content":"a\\x"},"finish_reason":null}]}', 'upstream_malformed_response'],
    ] as const) {
      handler = (_req, res) => sse(res, [`data: ${content}\n\ndata: ${content}\n\ndata: ${bad}\n\ndata: ${content}\n\n`]);
      const it = await http.postStream('/x', {}, { signal: signal() });
      await it.next();
      assert.equal((await it.next()).value?.plain, true);
      await rejectsWith(it.next(), code);
    }
    await agent.close();
  });

  test('an event that is not JSON → upstream_malformed_response', async () => {
    const { http, agent } = client();
    handler = (_req, res) => sse(res, [chunk(1), 'data: {nope\n\n']);
    const it = await http.postStream('/x', {}, { signal: signal() });
    await it.next();
    await rejectsWith(it.next(), 'upstream_malformed_response');
    await agent.close();
  });

  test('one event over maxResponseBytes → upstream_response_too_large (nothing buffers without bound)', async () => {
    const { http, agent } = client();
    handler = (_req, res) => {
      sse(res, [chunk(1), `data: "${'x'.repeat(3000)}`], false);
      setTimeout(() => res.write('x'.repeat(3000)), 20);
      setTimeout(() => res.end('"\n\n'), 40);
    };
    await rejectsWith(collect(await http.postStream('/x', {}, { signal: signal() })), 'upstream_response_too_large');
    await agent.close();
  });

  test('a consumer that stops pulling stops the upstream read (the upstream blocks); every event arrives once it pulls again', async () => {
    const { http, agent } = client({ maxResponseBytes: 64 * 1024 });
    const EVENTS = 2500; // 2,500 × ~16 KiB = ~40 MiB: far beyond what the sockets' buffers hold
    const pad = 'x'.repeat(16 * 1024);
    let written = 0;
    let finished = false;
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let i = 0;
      const pump = (): void => {
        while (i < EVENTS) {
          const ev = `data: {"n":${i++},"pad":"${pad}"}\n\n`;
          written += ev.length;
          if (!res.write(ev)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end('data: [DONE]\n\n', () => (finished = true));
      };
      pump();
    };
    const it = await http.postStream('/x', {}, { signal: signal() });
    assert.equal(((await nextChunk(it)).value as { n: number }).n, 0);
    await sleep(300);
    assert.ok(!finished, 'the upstream could not finish while nobody read');
    assert.ok(written < 30 * 1024 * 1024, `${(written / 2 ** 20).toFixed(1)} MiB written while the consumer paused`);
    let next = 1;
    for await (const v of it) assert.equal((v.chunk as { n: number }).n, next++);
    assert.equal(next, EVENTS);
    assert.ok(finished);
    await agent.close();
  });

  test('non-2xx on a stream request → the status mapping, before any iterator exists', async () => {
    const { http, agent } = client();
    handler = (_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":{"message":"boom"}}');
    };
    await rejectsWith(http.postStream('/x', {}, { signal: signal() }), 'upstream_error');
    await agent.close();
  });

  test('a connection dropped mid-stream → upstream_connection_lost', async () => {
    const { http, agent } = client();
    handler = (req, res) => {
      sse(res, [chunk(1)], false);
      setTimeout(() => req.socket.destroy(), 20);
    };
    const it = await http.postStream('/x', {}, { signal: signal() });
    assert.deepEqual(await nextChunk(it), { done: false, value: { n: 1 } });
    await rejectsWith(it.next(), 'upstream_connection_lost');
    await agent.close();
  });

  test('an abort mid-stream is rethrown as the signal’s reason', async () => {
    const { http, agent } = client();
    handler = (_req, res) => sse(res, [chunk(1)], false);
    const ac = new AbortController();
    const it = await http.postStream('/x', {}, { signal: ac.signal });
    await it.next();
    const reason = new DOMException('client went away', 'AbortError');
    setTimeout(() => ac.abort(reason), 10);
    await assert.rejects(it.next(), (err: unknown) => err === reason);
    await agent.close();
  });

  test('an abort before the first next() closes the connection and raises nothing unhandled', async () => {
    const { http, agent } = client();
    handler = (_req, res) => sse(res, [chunk(1)], false);
    const ac = new AbortController();
    const closedBefore = closedByClient;
    const it = await http.postStream('/x', {}, { signal: ac.signal });
    ac.abort(new DOMException('attempt finished', 'AbortError'));
    for (let i = 0; i < 50 && closedByClient === closedBefore; i++) await sleep(10);
    assert.equal(closedByClient, closedBefore + 1);
    await assert.rejects(it.next(), (err: unknown) => err instanceof DOMException && err.name === 'AbortError');
    await agent.close();
  });

  test('return() — after some chunks, or before the first next() — closes the connection', async () => {
    const { http, agent } = client();
    handler = (_req, res) => sse(res, [chunk(1), chunk(2)], false); // never ends by itself
    for (const reads of [1, 0]) {
      const closedBefore = closedByClient;
      const it = await http.postStream('/x', {}, { signal: signal() });
      for (let i = 0; i < reads; i++) await it.next();
      assert.deepEqual(await it.return?.(), { done: true, value: undefined });
      for (let i = 0; i < 50 && closedByClient === closedBefore; i++) await sleep(10);
      assert.equal(closedByClient, closedBefore + 1, `the upstream socket closed (after ${reads} reads)`);
      assert.deepEqual(await it.next(), { done: true, value: undefined });
    }
    await agent.close();
  });
});

describe('UpstreamClient: llama-server error framings', () => {
  test('`error: {…}` lines and `event: error` events become mid-stream errors', async () => {
    const cases = [
      `error: {"code":400,"message":"context exceeded","type":"invalid_request_error"}\n\n`,
      `event: error\ndata: {"message":"context exceeded","type":"server_error"}\n\n`,
      `error: {"message":"context exceeded"}`,
    ];
    for (const tail of cases) {
      const { http, agent } = client({ sseFraming: llamaSseFraming });
      handler = (_req, res) => sse(res, [chunk(1), tail]);
      const it = await http.postStream('/x', {}, { signal: signal() });
      assert.deepEqual(await nextChunk(it), { done: false, value: { n: 1 } });
      const e = await rejectsWith(it.next(), 'upstream_stream_error');
      assert.match(e.message, /context exceeded/);
      await agent.close();
    }
  });

  test('an `error:` line split across reads is still one mid-stream error, after the ordinary events before it', async () => {
    const { http, agent } = client({ sseFraming: llamaSseFraming });
    const line = 'error: {"code":400,"message":"the request exceeds the available context size","type":"invalid_request_error"}\n\n';
    const joined = chunk(1) + line + 'data: [DONE]\n\n';
    handler = (_req, res) => sse(res, [joined.slice(0, 20), joined.slice(20, 25), joined.slice(25)]);
    const it = await http.postStream('/x', {}, { signal: signal() });
    assert.deepEqual(await nextChunk(it), { done: false, value: { n: 1 } });
    const e = await rejectsWith(it.next(), 'upstream_stream_error');
    assert.match(e.message, /exceeds the available context size/);
    await agent.close();
  });

  test('without the framing, an `error:` line is ignored and `event: error` data is an ordinary event', async () => {
    const { http, agent } = client();
    handler = (_req, res) => sse(res, [chunk(1), 'error: {"message":"x"}\n\n', 'event: error\ndata: {"message":"y"}\n\n']);
    assert.deepEqual(await collect(await http.postStream('/x', {}, { signal: signal() })), [{ n: 1 }, { message: 'y' }]);
    await agent.close();
  });
});
