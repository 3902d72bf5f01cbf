/**
 * Early answers reach clients that are still sending. A 413 for a declared body over
 * `server.max_body_bytes`, or a 401 for a request without a key, is answered before the body has
 * been read; a client still writing its body (Node's http.request with a 64 MiB body) must read
 * that answer, not lose it to a reset of the connection (EPIPE / ECONNRESET), whatever the path's
 * spelling (plain, or percent-encoded: normalised to the same route). The gateway
 * drops what it does not read (its heap stays flat) and keeps serving.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './support/gateway.ts';
import { chatBody, eventually, MB, oneShot, postHead, rawEnvelope, serverConnections, settledHeap } from './support/hostile.ts';

const KEY = 'sk-gw-early-answer-0001';
const LIMIT = 1024 * 1024;
const BODY = 64 * MB;
const ROUNDS = 20;
const YAML = `
server: { max_body_bytes: ${LIMIT} }
backends: { demo: { type: fake, embedding_dimensions: 8 } }
models:
  chat: { targets: [ { backend: demo, model: echo } ] }
keys:
  - { name: k, key: "${KEY}" }
`;
const CHAT = '/v1/chat/completions';
/** the same route, percent-encoded (normalised to CHAT) */
const CHAT_ENCODED = '/v1/chat/%63ompletions';

interface Outcome {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** a transport error the client saw (EPIPE, ECONNRESET, …) */
  error?: string;
  sent: number;
}

/** One 64 KiB block, written again and again: the client itself holds no more than that. */
const BLOCK = Buffer.alloc(64 * 1024, 0x61);

/** Node's default: a keep-alive agent (with `agent: false` the client closes its own side once it has the answer). */
let agent: http.Agent;

/**
 * A node:http client that declares `total` bytes and writes them as fast as the socket takes them,
 * whatever comes back meanwhile (as a client that reads its answer only after sending does). It
 * stops only when the connection is gone. Resolves once the request has closed.
 */
function pushBody(url: string, path: string, headers: Record<string, string>, total: number, method = 'POST'): Promise<Outcome> {
  const u = new URL(path, url);
  return new Promise((resolve) => {
    let sent = 0;
    let error: string | undefined;
    let answer: Omit<Outcome, 'sent' | 'error'> | undefined;
    const req = http.request({
      host: u.hostname,
      port: Number(u.port),
      path,
      method,
      agent,
      // declared, unless the caller sends it chunked
      headers: { 'content-type': 'application/json', ...(headers['transfer-encoding'] ? {} : { 'content-length': String(total) }), ...headers },
    });
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => (answer = { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString('utf8') }));
      res.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    });
    req.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
    req.on('close', () => {
      const o: Outcome = { status: answer?.status ?? 0, headers: answer?.headers ?? {}, body: answer?.body ?? '', sent };
      if (error !== undefined) o.error = error;
      resolve(o);
    });
    const pump = (): void => {
      while (sent < total) {
        if (req.destroyed) return;
        const n = Math.min(BLOCK.length, total - sent);
        sent += n;
        if (!req.write(n === BLOCK.length ? BLOCK : BLOCK.subarray(0, n))) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

function checkEnvelope(o: Outcome, status: number, code: string, what: string): void {
  assert.equal(o.error, undefined, `${what}: transport error ${o.error} after ${o.sent} bytes sent (status seen: ${o.status})`);
  assert.equal(o.status, status, `${what}: status; body ${o.body}`);
  assert.equal(o.headers['content-type'], 'application/json', what);
  const body = JSON.parse(o.body) as { error: Record<string, unknown> };
  assert.deepEqual(Object.keys(body), ['error'], what);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type'], what);
  assert.equal(body.error.code, code, what);
  assert.equal(body.error.type, status === 401 ? 'authentication_error' : 'invalid_request_error', what);
}

async function stillServes(gw: TestGateway): Promise<void> {
  const r = await oneShot(gw.url, 'POST', CHAT, chatBody('chat'), { authorization: `Bearer ${KEY}` });
  assert.equal(r.status, 200, r.text);
}

let gw: TestGateway;
before(async () => {
  gw = await startGateway(YAML);
  agent = new http.Agent({ keepAlive: true });
});
after(async () => {
  agent.destroy();
  await gw.close();
});

describe('early answers reach a client still sending its body', () => {
  for (const [way, path] of [
    ['plain path', CHAT],
    ['percent-encoded path', CHAT_ENCODED],
  ] as const) {
    it(`${way}: a declared 64 MiB body → 413 request_too_large, ${ROUNDS} times in a row; heap flat, still serving`, { timeout: 120_000 }, async () => {
      const auth = { authorization: `Bearer ${KEY}` };
      // one round first, so what the first connection allocates once is not counted as growth
      checkEnvelope(await pushBody(gw.url, path, auth, BODY), 413, 'request_too_large', 'warm-up');
      const heap0 = await settledHeap();
      for (let i = 0; i < ROUNDS; i++) checkEnvelope(await pushBody(gw.url, path, auth, BODY), 413, 'request_too_large', `round ${i + 1}`);
      const heap1 = await settledHeap();
      // every refused connection is let go of: none is kept by the gateway after its linger
      await eventually(() => serverConnections(gw.running.server), (n) => n === 0, 'the gateway to let go of every connection');
      const growth = heap1 - heap0;
      assert.ok(growth < 64 * MB, `heap grew by ${(growth / MB).toFixed(1)} MB over ${ROUNDS} refused 64 MiB bodies`);
      await stillServes(gw);
    });

    it(`${way}: no key and a 128 MiB body → 401 invalid_api_key, read by the client, told at once to stop`, { timeout: 60_000 }, async () => {
      for (let i = 0; i < 5; i++) {
        const o = await pushBody(gw.url, path, {}, 2 * BODY);
        checkEnvelope(o, 401, 'invalid_api_key', `round ${i + 1}`);
        // the connection closes with the answer: the client is not made to upload a body nobody reads
        assert.equal(o.headers.connection, 'close', `round ${i + 1}`);
        assert.ok(o.sent < BODY, `round ${i + 1}: the client sent ${(o.sent / MB).toFixed(1)} MB before it was stopped`);
      }
      await stillServes(gw);
    });

    it(`${way}: a chunked body going over the limit mid-way → 413, read by a client still sending`, { timeout: 60_000 }, async () => {
      for (let i = 0; i < 5; i++) {
        checkEnvelope(await pushBody(gw.url, path, { authorization: `Bearer ${KEY}`, 'transfer-encoding': 'chunked' }, BODY), 413, 'request_too_large', `round ${i + 1}`);
      }
      await stillServes(gw);
    });
  }

  it('a GET that comes with a 64 MiB body → its answer, read by the client, told at once to stop', { timeout: 60_000 }, async () => {
    const o = await pushBody(gw.url, '/health', {}, BODY, 'GET');
    assert.equal(o.error, undefined, `transport error ${o.error} after ${o.sent} bytes sent`);
    assert.equal(o.status, 200, o.body);
    assert.equal(o.headers.connection, 'close');
    assert.ok(o.sent < BODY, `the client sent ${(o.sent / MB).toFixed(1)} MB before it was stopped`);
    await stillServes(gw);
  });

  it('a client that sends all of a declared body before it reads gets the 413 (8 MiB, raw socket)', { timeout: 60_000 }, async () => {
    const total = 8 * MB;
    for (let i = 0; i < 5; i++) {
      const r = await rawClient(postHead(CHAT, total, `authorization: Bearer ${KEY}\r\n`), total, { end: true }).done;
      assert.equal(r.error, undefined, `round ${i + 1}: transport error ${r.error} after ${r.sent} bytes sent; received ${JSON.stringify(r.data.slice(0, 80))}`);
      assert.equal(r.sent, total);
      const e = rawEnvelope(r.data);
      assert.deepEqual(e, { status: 413, code: 'request_too_large' });
      assert.match(r.data, /\r\nconnection: close\r\n/i);
    }
    await stillServes(gw);
  });

  it('a client that declares a huge body and goes silent, or never stops sending, gets the 413 and loses the socket', { timeout: 60_000 }, async () => {
    const head = postHead(CHAT, 1024 * MB, `authorization: Bearer ${KEY}\r\n`);
    // both keep their side open: only the gateway's bounds end these connections
    const silent = rawClient(head, 9, { end: false });
    const endless = rawClient(head, Infinity, { end: false });
    // the endless one learns of the end when its next write is refused
    const e = await endless.done;
    assert.deepEqual(rawEnvelope(e.data), { status: 413, code: 'request_too_large' }, 'endless');
    assert.ok(e.sent < 1024 * MB, `the endless client sent ${(e.sent / MB).toFixed(1)} MB`);
    // the silent one got its answer and the gateway's FIN; it would never hear more
    await silent.ended;
    assert.deepEqual(rawEnvelope(silent.received()), { status: 413, code: 'request_too_large' }, 'silent');
    await eventually(() => serverConnections(gw.running.server), (n) => n === 0, 'the gateway to let go of every connection');
    silent.socket.destroy();
    await stillServes(gw);
  });
});

interface RawClient {
  socket: net.Socket;
  received(): string;
  /** the gateway's side ended (its FIN came) */
  ended: Promise<void>;
  /** the socket closed: what came back, how much was sent, the error seen if any */
  done: Promise<{ data: string; sent: number; error?: string }>;
}

/**
 * A plain socket (half-open allowed: a FIN from the gateway does not stop it writing, as with a BSD
 * socket) that writes `head`, then `total` body bytes (Infinity: until the socket is gone) whatever
 * comes back meanwhile, then ends its side if `end`.
 */
function rawClient(head: string, total: number, opts: { end: boolean }): RawClient {
  const { hostname, port } = new URL(gw.url);
  let sent = 0;
  let error: string | undefined;
  const parts: Buffer[] = [];
  const socket = net.connect({ port: Number(port), host: hostname, allowHalfOpen: true }, () => {
    socket.write(head);
    pump();
  });
  const pump = (): void => {
    while (sent < total && !socket.destroyed) {
      const n = Math.min(BLOCK.length, total - sent);
      sent += n;
      if (!socket.write(n === BLOCK.length ? BLOCK : BLOCK.subarray(0, n))) {
        socket.once('drain', pump);
        return;
      }
    }
    if (opts.end) socket.end();
  };
  const received = (): string => Buffer.concat(parts).toString('latin1');
  socket.on('data', (d: Buffer) => parts.push(d));
  socket.on('error', (e: NodeJS.ErrnoException) => (error ??= e.code ?? e.message));
  const ended = new Promise<void>((resolve) => socket.once('end', resolve));
  const done = new Promise<{ data: string; sent: number; error?: string }>((resolve) =>
    socket.on('close', () => {
      const r: { data: string; sent: number; error?: string } = { data: received(), sent };
      if (error !== undefined) r.error = error;
      resolve(r);
    }),
  );
  return { socket, received, ended, done };
}
