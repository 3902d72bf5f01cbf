/**
 * Hostile clients at volume, against real gateways on loopback (slowloris is in
 * test/slowloris.test.ts): clients that vanish mid-request, before the answer and mid-stream, readers
 * that never drain a stream, and a few thousand malformed, oversized or odd requests — each gets a
 * clear answer or a clean close, the gateway keeps serving everyone else meanwhile, and afterwards
 * its connections, in-flight gauge, active handles and heap are back where they started.
 *
 * Bounded on purpose (a shared 2-core machine): counts in the hundreds or low thousands, no
 * wall-clock performance asserts, generous deadlines.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { startFakeOpenAI, type FakeUpstream } from './support/fake-openai-upstream.ts';
import { startEndlessUpstream, type EndlessUpstream } from './support/endless-sse-upstream.ts';
import { startGateway, type TestGateway } from './support/gateway.ts';
import {
  activeResources,
  chatBody,
  cleanAndServing,
  eventually,
  inFlightOf,
  statusInFlightOf,
  pool,
  requestsTotalOf,
  MB,
  metricSum,
  oneShot,
  postHead,
  rawSocket,
  scrapeMetrics,
  serverConnections,
  settledHeap,
  startBody,
  type RawSocket,
  type Reply,
} from './support/hostile.ts';

const ADMIN = 'hostile-admin-key-0123456789';
const CHAT = '/v1/chat/completions';
const inFlight = (gw: TestGateway): Promise<number> => inFlightOf(gw, ADMIN);
const requestsTotal = (gw: TestGateway, route = CHAT): Promise<number> => requestsTotalOf(gw, ADMIN, route);
const assertCleanAndServing = (gw: TestGateway, model: string): Promise<void> => cleanAndServing(gw, model, ADMIN);

// ---------------------------------------------------------------------------------------------

describe('clients that vanish, and a reader that never drains', () => {
  let up: FakeUpstream;
  let endless: EndlessUpstream;
  let gw: TestGateway;
  before(async () => {
    up = await startFakeOpenAI();
    up.onModel('slow-stream', { kind: 'stream', chunks: Array.from({ length: 30 }, (_, i) => `w${i} `), delayMs: 20 });
    up.onModel('delayed', { kind: 'reply', content: 'late answer', delayMs: 400 });
    up.onModel('ok', { kind: 'reply', content: 'fine' });
    endless = await startEndlessUpstream(4096);
    gw = await startGateway(`
backends:
  up: { type: openai, base_url: "${up.url}", api_key: sk-hostile-not-real }
  endless: { type: openai, base_url: "${endless.url}", api_key: sk-hostile-not-real }
models:
  ok: { targets: [ { backend: up, model: ok } ] }
  slow: { targets: [ { backend: up, model: slow-stream } ] }
  delayed: { targets: [ { backend: up, model: delayed } ] }
  endless: { targets: [ { backend: endless, model: endless } ] }
routing: { retry: { max_retries: 0 } }
admin: { key: "${ADMIN}" }
`);
  });
  after(async () => {
    await gw.close();
    await up.close();
    await endless.close();
  });

  it('300 clients that send half a body and vanish: nothing reaches the upstream, every request is accounted for', { timeout: 60_000 }, async () => {
    const N = 300;
    const upstreamBefore = up.requests.length;
    const counted0 = await requestsTotal(gw);
    const body = chatBody('ok', 'x'.repeat(2000));
    await pool(N, 100, async () => {
      const s = await startBody(gw.url, CHAT, body, 1000);
      await sleep(10);
      s.socket.destroy();
      await s.done;
    });
    await assertCleanAndServing(gw, 'ok');
    assert.equal(up.requests.length - upstreamBefore, 1, 'only the check request reached the upstream');
    const counted = (await requestsTotal(gw)) - counted0;
    assert.equal(counted, N + 1, 'requests_total counts every vanished client (and the check request)');
  });

  it('100 clients that vanish while waiting for a slow answer: each upstream request is aborted', { timeout: 60_000 }, async () => {
    const N = 100;
    up.clientAborts = 0;
    const counted0 = await requestsTotal(gw);
    const body = chatBody('delayed');
    await pool(N, 50, async () => {
      const s = rawSocket(gw.url, postHead(CHAT, Buffer.byteLength(body)) + body);
      await sleep(100);
      s.socket.destroy();
      await s.done;
    });
    await eventually(() => up.clientAborts, (n) => n >= N, `${N} upstream requests aborted`, 15_000);
    await assertCleanAndServing(gw, 'ok');
    assert.equal((await requestsTotal(gw)) - counted0, N + 1);
  });

  it('200 clients that read two stream events and vanish: each upstream stream is aborted, in-flight returns to 0', { timeout: 60_000 }, async () => {
    const N = 200;
    up.clientAborts = 0;
    const counted0 = await requestsTotal(gw);
    const body = chatBody('slow', 'stream please', { stream: true });
    let sawTwoEvents = 0;
    await pool(N, 50, async () => {
      const s = rawSocket(gw.url, postHead(CHAT, Buffer.byteLength(body)) + body);
      s.socket.on('data', () => {
        if (!s.socket.destroyed && (s.received().match(/\ndata: /g)?.length ?? 0) >= 2) {
          sawTwoEvents++;
          s.socket.destroy();
        }
      });
      await s.done;
    });
    assert.equal(sawTwoEvents, N, 'every client saw the stream start before vanishing');
    await eventually(() => up.clientAborts, (n) => n >= N, `${N} upstream streams aborted`, 15_000);
    await assertCleanAndServing(gw, 'ok');
    assert.equal((await requestsTotal(gw)) - counted0, N + 1);
    // and a full stream still completes
    const full = await oneShot(gw.url, 'POST', CHAT, body);
    assert.equal(full.status, 200);
    assert.ok(full.text.trimEnd().endsWith('data: [DONE]'), full.text.slice(-200));
  });

  it('readers that never drain an endless stream: the upstream is backpressured, memory stays bounded, all is released on close', { timeout: 60_000 }, async () => {
    const READERS = 5;
    const heap0 = await settledHeap();
    const body = chatBody('endless', 'go on forever', { stream: true });
    const readers: RawSocket[] = [];
    for (let i = 0; i < READERS; i++) {
      const s = rawSocket(gw.url, postHead(CHAT, Buffer.byteLength(body)) + body);
      let got = 0;
      s.socket.on('data', (d: Buffer) => {
        got += d.length;
        if (got > 64 * 1024) s.socket.pause(); // read a little, then never again
      });
      readers.push(s);
    }
    await eventually(() => endless.open(), (n) => n === READERS, 'every stream to reach the upstream');
    // the upstream fills the kernel buffers on its way and then stalls: written bytes level off
    await sleep(1500);
    const w1 = endless.written();
    await sleep(1500);
    const w2 = endless.written();
    const heapPaused = await settledHeap();
    assert.ok(w2 - w1 < 2 * MB, `the upstream is backpressured: ${((w2 - w1) / MB).toFixed(1)} MB written in the last 1.5 s`);
    assert.ok(w2 < READERS * 40 * MB, `what was written is bounded by socket buffers, not the stream's length: ${(w2 / MB).toFixed(1)} MB for ${READERS} streams`);
    assert.ok(heapPaused - heap0 < 32 * MB, `gateway heap grew by ${((heapPaused - heap0) / MB).toFixed(1)} MB with ${READERS} stalled readers`);
    assert.equal(await inFlight(gw), READERS, 'the stalled streams are in flight');
    assert.equal(await statusInFlightOf(gw, ADMIN), READERS, '/status counts them too');
    for (const s of readers) s.socket.destroy();
    await eventually(() => endless.open(), (n) => n === 0, 'every upstream stream to be closed', 15_000);
    await assertCleanAndServing(gw, 'ok');
    assert.equal(await statusInFlightOf(gw, ADMIN), 0, '/status: nothing in flight');
    const heap1 = await settledHeap();
    assert.ok(heap1 - heap0 < 16 * MB, `heap back near its baseline: ${((heap1 - heap0) / MB).toFixed(1)} MB over`);
  });

  it('a reader that stops reading for longer than stream_idle_timeout_ms: the upstream stream is released, the backend is not blamed', { timeout: 30_000 }, async () => {
    const e2 = await startEndlessUpstream(4096);
    const g2 = await startGateway(`
backends:
  e: { type: openai, base_url: "${e2.url}", api_key: sk-hostile-not-real, stream_idle_timeout_ms: 500 }
  f: { type: fake }
models:
  endless: { targets: [ { backend: e, model: endless } ] }
  ok: { targets: [ { backend: f, model: echo } ] }
routing: { breaker: { consecutive_failures: 2 } }
admin: { key: "${ADMIN}" }
`);
    const readers: RawSocket[] = [];
    try {
      const body = chatBody('endless', 'x', { stream: true });
      for (let i = 0; i < 3; i++) {
        const s = rawSocket(g2.url, postHead(CHAT, Buffer.byteLength(body)) + body);
        s.socket.once('data', () => s.socket.pause());
        readers.push(s);
      }
      await eventually(() => e2.started(), (n) => n === 3, 'the streams to start');
      await eventually(() => e2.open(), (n) => n === 0, 'the upstream streams to be released while the clients hold their sockets', 15_000);
      const m = await scrapeMetrics(g2.url, ADMIN);
      assert.equal(metricSum(m, 'switchyard_upstream_attempts_total', { backend: 'e', outcome: 'success' }), 3, 'the attempts count as successes');
      assert.equal(metricSum(m, 'switchyard_circuit_breaker_state', { backend: 'e' }), 0, 'the breaker stays closed');
      for (const s of readers) s.socket.destroy();
      await assertCleanAndServing(g2, 'ok');
    } finally {
      for (const s of readers) s.socket.destroy();
      await g2.close();
      await e2.close();
    }
  });

  // Once stream_idle_timeout_ms has released the upstream of a client that stopped reading (test
  // above), the final error event and the end of the response are queued behind the unread bytes;
  // server.send_timeout_ms then disconnects the client, giving back its connection, its in-flight
  // count and its max_concurrent_requests slot.
  it('a client that never reads is disconnected once its stream has given up, releasing its concurrency slot', { timeout: 30_000 }, async () => {
    const e2 = await startEndlessUpstream(4096);
    const g2 = await startGateway(`
server: { send_timeout_ms: 1000 }
backends: { e: { type: openai, base_url: "${e2.url}", stream_idle_timeout_ms: 500 } }
models: { endless: { targets: [ { backend: e, model: endless } ] } }
`);
    const body = chatBody('endless', 'x', { stream: true });
    const s = rawSocket(g2.url, postHead(CHAT, Buffer.byteLength(body)) + body, 20_000);
    try {
      s.socket.once('data', () => s.socket.pause());
      await eventually(() => e2.started(), (n) => n === 1, 'the stream to start');
      await eventually(() => e2.open(), (n) => n === 0, 'the upstream stream to be released', 10_000);
      await eventually(() => serverConnections(g2.running.server), (n) => n === 0, 'the gateway to drop the non-reading client', 4_000);
    } finally {
      s.socket.destroy();
      await g2.close();
      await e2.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------

describe('overload at volume: far more concurrent requests than max_concurrent_requests', () => {
  const MAX = 8;
  const CLIENT_KEY = 'sk-hostile-client-key-0001';
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway(`
server: { max_concurrent_requests: ${MAX} }
backends: { slow: { type: fake, chunk_delay_ms: 20 } }
models: { m: { targets: [ { backend: slow, model: echo } ] } }
keys: [ { name: hostile, key: "${CLIENT_KEY}" } ]
admin: { key: "${ADMIN}" }
`);
  });
  after(() => gw.close());
  const auth = { authorization: `Bearer ${CLIENT_KEY}` };
  const STREAM = chatBody('m', 'a b c d e f g h i j', { stream: true });

  it('300 requests, 60 at a time: each is served or refused at once with 503 + retry-after; nothing hangs; the slots come back', { timeout: 60_000 }, async () => {
    const N = 300;
    const replies: Reply[] = [];
    await pool(N, 60, async () => {
      replies.push(await oneShot(gw.url, 'POST', CHAT, STREAM, auth));
    });
    const served = replies.filter((r) => r.status === 200);
    const refused = replies.filter((r) => r.status === 503);
    assert.equal(served.length + refused.length, N, `only 200 and 503: ${[...new Set(replies.map((r) => r.status))].join(', ')}`);
    assert.ok(served.length >= MAX, `at least ${MAX} served (${served.length})`);
    assert.ok(refused.length > 0, 'some refused');
    for (const r of served) assert.ok(r.text.trimEnd().endsWith('data: [DONE]'));
    for (const r of refused) {
      assert.equal(r.headers['retry-after'], '1');
      assert.match(r.text, /"code":"server_overloaded"/);
    }
    process.stderr.write(`# overload: ${N} requests at concurrency 60 against max_concurrent_requests ${MAX}: ${served.length} served, ${refused.length} refused with 503\n`);
    await eventually(() => serverConnections(gw.running.server), (n) => n === 0, 'no connection left', 15_000);
    await eventually(() => inFlight(gw), (n) => n === 0, 'in-flight back to 0', 15_000);
    // every slot is free again: MAX streams at once are all served
    const again = await Promise.all(Array.from({ length: MAX }, () => oneShot(gw.url, 'POST', CHAT, STREAM, auth)));
    assert.deepEqual(again.map((r) => r.status), Array<number>(MAX).fill(200));
  });

  // Refusals at the edge (503 server_overloaded, 401) happen before any route handler runs; the
  // route is resolved before those guards, so they are counted under it.
  it('503 server_overloaded and 401 refusals are counted in switchyard_requests_total', { timeout: 30_000 }, async () => {
    const counted0 = metricSum(await scrapeMetrics(gw.url, ADMIN), 'switchyard_requests_total');
    const replies: Reply[] = [];
    await pool(40, 40, async () => {
      replies.push(await oneShot(gw.url, 'POST', CHAT, STREAM, auth));
    });
    replies.push(await oneShot(gw.url, 'POST', CHAT, STREAM, { authorization: 'Bearer sk-not-a-known-client-key' }));
    await eventually(() => inFlight(gw), (n) => n === 0, 'in-flight back to 0', 15_000);
    const counted = metricSum(await scrapeMetrics(gw.url, ADMIN), 'switchyard_requests_total') - counted0;
    assert.equal(counted, replies.length, `statuses ${replies.map((r) => r.status).join(',')}`);
  });
});

// ---------------------------------------------------------------------------------------------

describe('memory and handles return to baseline after thousands of hostile requests', () => {
  const LIMIT = 1024 * 1024;
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway(`
server: { max_body_bytes: ${LIMIT} }
backends:
  f: { type: fake }
  slowf: { type: fake, chunk_delay_ms: 5 }
models:
  m: { targets: [ { backend: f, model: echo } ] }
  slow: { targets: [ { backend: slowf, model: echo } ] }
admin: { key: "${ADMIN}" }
`);
  });
  after(() => gw.close());

  type Outcome = string;
  const MESSAGES_5000 = JSON.stringify({ model: 'm', messages: Array.from({ length: 5000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i}` })) });
  const GIANT = chatBody('m', 'g'.repeat(LIMIT - 200));
  const OVER = chatBody('m', 'o'.repeat(LIMIT + 10));
  const DEEP = `{"model":"m","messages":[{"role":"user","content":"x"}],"metadata":${'['.repeat(2000)}${']'.repeat(2000)}}`;
  const BAD_UTF8 = Buffer.concat([Buffer.from('{"model":"m","messages":[{"role":"user","content":"'), Buffer.from([0xc3, 0x28, 0xff, 0xfe]), Buffer.from('"}]}')]);
  const ABSURD_HEADERS = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`x-absurd-${i}`, 'v'.repeat(100)]));
  const STREAM = chatBody('slow', Array.from({ length: 40 }, (_, i) => `word${i}`).join(' '), { stream: true });
  const fuzz: string[] = [
    ...fc.sample(fc.json({ maxDepth: 4 }), { numRuns: 150, seed: 9 }),
    ...fc.sample(
      fc.record({ model: fc.constantFrom('m', 'nope', ''), messages: fc.array(fc.record({ role: fc.constantFrom('user', 'system', 'assistant', 'tool', 'wizard'), content: fc.oneof(fc.string(), fc.array(fc.record({ type: fc.constantFrom('text', 'image_url', 'hologram'), text: fc.string() }))) }), { maxLength: 5 }), temperature: fc.oneof(fc.double(), fc.string()) }, { requiredKeys: [] }),
      { numRuns: 150, seed: 10 },
    ).map((v) => JSON.stringify(v)),
  ];

  async function post(body: string | Buffer, headers: Record<string, string> = {}): Promise<Reply> {
    return oneShot(gw.url, 'POST', CHAT, body, headers);
  }

  /** One hostile request of kind `i % 16`; returns "<kind> <outcome>". */
  async function hostile(i: number): Promise<Outcome> {
    const k = i % 16;
    const status = async (name: string, p: Promise<Reply>): Promise<Outcome> => {
      try {
        return `${name} ${(await p).status}`;
      } catch (err) {
        return `${name} transport:${(err as NodeJS.ErrnoException).code ?? 'error'}`;
      }
    };
    switch (k) {
      case 0:
        return status('giant string near the body limit', post(GIANT));
      case 1:
        return status('over the body limit', post(OVER));
      case 2:
        return status('5,000 messages', post(MESSAGES_5000));
      case 3:
        return status('invalid UTF-8', post(BAD_UTF8));
      case 4:
        return status('2,000-deep nesting', post(DEEP));
      case 5:
        return status('truncated JSON', post(chatBody('m').slice(0, 20 + (i % 17))));
      case 6:
        return status('duplicate keys', post('{"model":"nope","model":"m","messages":[{"role":"user","content":"a","content":"b"}]}'));
      case 7:
        return status('unknown fields', post(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x', mood: 'odd' }], frobnicate: { deep: [1, 2, 3] } })));
      case 8:
        return status('unknown content part', post(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: [{ type: 'hologram', hologram: { x: 1 } }] }] })));
      case 9:
        return status('wrong types', post(JSON.stringify({ model: 7, messages: { role: 'user' }, stream: 'yes', max_tokens: -1 })));
      case 10:
        return status('absurd headers', post(chatBody('m'), ABSURD_HEADERS));
      case 11: {
        const body = chatBody('m', 'y'.repeat(5000));
        const s = await startBody(gw.url, CHAT, body, 2500);
        await sleep(5);
        s.socket.destroy();
        await s.done;
        return 'vanished mid-body';
      }
      case 12: {
        const s = rawSocket(gw.url, postHead(CHAT, Buffer.byteLength(STREAM)) + STREAM);
        await new Promise<void>((resolve) => {
          s.socket.on('data', () => {
            if ((s.received().match(/\ndata: /g)?.length ?? 0) >= 2) s.socket.destroy();
          });
          void s.done.then(() => resolve());
        });
        return 'vanished mid-stream';
      }
      case 13:
        return status('stream read to the end', post(STREAM));
      default:
        return status('fuzzed body', post(fuzz[i % fuzz.length] as string));
    }
  }

  it('3,200 hostile requests at concurrency 16: heap within 20 MB of its baseline, handles back to baseline', { timeout: 180_000 }, async () => {
    const WARMUP = 320;
    const N = 3200;
    const seen = new Map<string, number>();
    const run = async (n: number, offset: number): Promise<void> =>
      pool(n, 16, async (i) => {
        const o = await hostile(offset + i);
        seen.set(o, (seen.get(o) ?? 0) + 1);
      });
    await run(WARMUP, 0);
    await eventually(() => serverConnections(gw.running.server), (n) => n === 0, 'warm-up connections to close', 15_000);
    gw.logs.length = 0; // the test helper keeps every log line; that is not the gateway's memory
    await sleep(200);
    const handles0 = activeResources();
    const heap0 = await settledHeap();
    const counted0 = await requestsTotal(gw);
    seen.clear();

    await run(N, WARMUP);

    await eventually(() => serverConnections(gw.running.server), (n) => n === 0, 'every client connection to close', 15_000);
    await eventually(() => inFlight(gw), (n) => n === 0, 'in-flight to return to 0', 15_000);
    const counted = (await requestsTotal(gw)) - counted0;
    gw.logs.length = 0;
    await sleep(200);
    const heap1 = await settledHeap();
    const handles1 = activeResources();
    const table = [...seen.entries()].sort().map(([o, n]) => `${o} ×${n}`).join(', ');

    // what every kind got: a clear status, never a 5xx, never a transport error except where the
    // gateway closes on purpose (413 while the client is still sending)
    for (const [o, n] of seen) {
      assert.doesNotMatch(o, / 5\d\d$/, `no 5xx: ${o} ×${n}`);
      if (o.includes('transport:')) assert.match(o, /^over the body limit transport:(ECONNRESET|EPIPE)$/, `unexpected transport error: ${o} ×${n}`);
    }
    const expect = (name: string, status: number): void => assert.ok((seen.get(`${name} ${status}`) ?? 0) > 0, `${name} → ${status} (saw: ${table})`);
    expect('giant string near the body limit', 200);
    expect('5,000 messages', 200);
    expect('invalid UTF-8', 400);
    expect('2,000-deep nesting', 400);
    expect('truncated JSON', 400);
    expect('duplicate keys', 200);
    expect('unknown fields', 200);
    expect('unknown content part', 400);
    expect('wrong types', 400);
    expect('absurd headers', 431);
    expect('stream read to the end', 200);
    assert.equal(seen.get('vanished mid-stream'), N / 16);
    assert.equal(seen.get('vanished mid-body'), N / 16);
    // absurd headers never reach the app (431 from the HTTP parser); every other request is counted
    assert.equal(counted, N - N / 16, `requests_total counted ${counted}`);

    const growth = heap1 - heap0;
    process.stderr.write(`# hostile memory: heap ${(heap0 / MB).toFixed(1)} → ${(heap1 / MB).toFixed(1)} MB (${growth >= 0 ? '+' : ''}${(growth / MB).toFixed(2)} MB) after ${N} requests; handles ${JSON.stringify(handles0)} → ${JSON.stringify(handles1)}\n# ${table}\n`);
    assert.ok(growth < 20 * MB, `heap grew by ${(growth / MB).toFixed(1)} MB over ${N} hostile requests`);
    for (const [type, n] of Object.entries(handles1)) {
      assert.ok(n <= (handles0[type] ?? 0), `active ${type}: ${n} after vs ${handles0[type] ?? 0} before`);
    }
  });
});
