/**
 * writeSse on a real node:http response: how a stream's chunks are grouped into socket writes
 * (the first token at once with what was buffered before it; the rest of a batch joined; a stream
 * read in one go ends in the same write as its last chunk; chunks that arrive apart are not held),
 * and that pollable and plain async sources produce the same bytes.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { DONE, type Pollable } from '../lib/pollable.ts';
import { ChunkPart, EventPart, type StreamPart } from '../protocol/stream-part.ts';
import { writeSse } from './sse.ts';

interface Captured {
  /** each res.write / res.end payload, in order ('end:' prefixed for the end) */
  writes: string[];
  /** what the client received */
  body: string;
  ended: Error | null | undefined;
}

/** The response being served by capture(). */
let serving: http.ServerResponse | undefined;

/** Serves one request with writeSse(src) and records the payload of every write and end. */
async function capture(src: AsyncIterable<StreamPart>, busy?: () => boolean): Promise<Captured> {
  const writes: string[] = [];
  let ended: Error | null | undefined;
  const server = http.createServer((_req, res) => {
    serving = res;
    const write = res.write.bind(res) as (chunk: string) => boolean;
    const end = res.end.bind(res) as (chunk?: string) => http.ServerResponse;
    res.write = ((chunk: string) => (writes.push(String(chunk)), write(chunk))) as typeof res.write;
    res.end = ((chunk?: string) => (writes.push(`end:${chunk ?? ''}`), end(chunk))) as typeof res.end;
    writeSse(res, {}, src, 5000, (err) => (ended = err), undefined, busy);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const port = (server.address() as AddressInfo).port;
    const body = await new Promise<string>((resolve, reject) => {
      http
        .get({ port, host: '127.0.0.1', path: '/' }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => resolve(text));
        })
        .on('error', reject);
    });
    return { writes, body, ended };
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
}

function chunks(n: number, flushAt: number): StreamPart[] {
  const out = Array.from({ length: n }, (_, i) => ChunkPart.of({ i }));
  (out[flushAt] as StreamPart).flush = true;
  return out;
}

/** Hands out `items` synchronously through poll(), as a stream read in one upstream read does. */
function pollableOf(items: StreamPart[]): AsyncIterable<StreamPart> {
  let i = 0;
  const it: Pollable<StreamPart> = {
    poll: () => (i < items.length ? { done: false, value: items[i++] as StreamPart } : DONE),
    next: async () => (i < items.length ? { done: false, value: items[i++] as StreamPart } : DONE),
  };
  return { [Symbol.asyncIterator]: () => it };
}

async function* plainOf(items: StreamPart[]): AsyncGenerator<StreamPart> {
  for (const c of items) yield c;
}

const expected = (n: number): string => `${Array.from({ length: n }, (_, i) => `data: {"i":${i}}\n\n`).join('')}data: [DONE]\n\n`;

describe('writeSse: socket writes', () => {
  test('a stream read in one go: the first token (with the chunk before it) in one write, everything else with the end', async () => {
    const c = await capture(pollableOf(chunks(22, 1)));
    assert.equal(c.body, expected(22));
    assert.deepEqual(c.writes, ['data: {"i":0}\n\ndata: {"i":1}\n\n', `end:${expected(22).slice('data: {"i":0}\n\ndata: {"i":1}\n\n'.length)}`]);
    assert.equal(c.ended, null);
  });

  test('a plain async source gives the same bytes, and its batch is joined too', async () => {
    const c = await capture(plainOf(chunks(22, 1)));
    assert.equal(c.body, expected(22));
    assert.equal(c.writes[0], 'data: {"i":0}\n\ndata: {"i":1}\n\n');
    assert.ok(c.writes.length <= 3, `${c.writes.length} writes`);
  });

  test('without a flush point (a replayed stream) everything leaves together', async () => {
    const c = await capture(pollableOf(Array.from({ length: 5 }, (_, i) => ChunkPart.of({ i }))));
    assert.equal(c.body, expected(5));
    assert.deepEqual(c.writes, [`end:${expected(5)}`]);
  });

  test('each part is written as its own text: a chunk as the text it came in until changed, a forwarded event with its name', async () => {
    const kept = ChunkPart.parsed({ a: 1 }, '{"a": 1.0}');
    const changed = ChunkPart.parsed<{ a: number }>({ a: 1 }, '{"a": 1.0}');
    changed.edit().a = 2;
    const c = await capture(plainOf([kept, changed, new EventPart('response.created', '{"x":1}'), new EventPart('', 'a\nb')]));
    assert.equal(c.body, 'data: {"a": 1.0}\n\ndata: {"a":2}\n\nevent: response.created\ndata: {"x":1}\n\ndata: a\ndata: b\n\ndata: [DONE]\n\n');
  });

  test('chunks that arrive apart are written apart, none held for the next', async () => {
    async function* paced(): AsyncGenerator<StreamPart> {
      const items = chunks(4, 1);
      for (const c of items) {
        await new Promise((r) => setTimeout(r, 20));
        yield c;
      }
    }
    const c = await capture(paced());
    assert.equal(c.body, expected(4));
    // each leaves in the turn it arrived in (the router, not the writer, holds chunks before the
    // commit point); the last one arrives together with the end of the stream
    assert.deepEqual(c.writes, ['data: {"i":0}\n\n', 'data: {"i":1}\n\n', 'data: {"i":2}\n\n', 'end:data: {"i":3}\n\ndata: [DONE]\n\n']);
  });

  test('the first token has left the process before the writer pulls the next chunk of the same read', async () => {
    // Node corks a chunked write until the next tick; the writer must not keep the first token
    // in Node's buffer while it processes (parses) the rest of the read
    const items = chunks(22, 1);
    const heldAtNextPull: number[] = [];
    let i = 0;
    const it: Pollable<StreamPart> = {
      poll: () => {
        if (i === 2) heldAtNextPull.push(serving?.socket?.writableLength ?? -1);
        return i < items.length ? { done: false, value: items[i++] as StreamPart } : DONE;
      },
      next: async () => DONE,
    };
    const c = await capture({ [Symbol.asyncIterator]: () => it });
    assert.equal(c.body, expected(22));
    assert.deepEqual(heldAtNextPull, [0]);
  });

  test('while other requests are in flight, the first token waits for the rest of its read: a stream read whole leaves in one system call with its end', async () => {
    const items = chunks(22, 1);
    const heldAtNextPull: number[] = [];
    let socketWrites = 0;
    let i = 0;
    const it: Pollable<StreamPart> = {
      poll: () => {
        if (i === 2) {
          heldAtNextPull.push(serving?.socket?.writableLength ?? -1);
          // every system call for this response from here on (writev for joined buffers, write for one)
          const sock = serving?.socket as unknown as { _writev: (...a: unknown[]) => unknown; _write: (...a: unknown[]) => unknown } | undefined;
          if (sock) {
            const wv = sock._writev.bind(sock);
            const w = sock._write.bind(sock);
            sock._writev = (...a: unknown[]) => (socketWrites++, wv(...a));
            sock._write = (...a: unknown[]) => (socketWrites++, w(...a));
          }
        }
        return i < items.length ? { done: false, value: items[i++] as StreamPart } : DONE;
      },
      next: async () => DONE,
    };
    let asked = 0;
    const c = await capture({ [Symbol.asyncIterator]: () => it }, () => (asked++, true));
    assert.equal(c.body, expected(22));
    assert.ok(asked > 0, 'the writer asked whether others are in flight');
    assert.ok((heldAtNextPull[0] ?? 0) > 0, 'the first token is still in Node\'s buffer when the next chunk is pulled');
    assert.equal(socketWrites, 1, 'head, first token, the rest and the end: one system call');
  });

  test('a failure after the commit point: what was ready, then the error event, in the end write; no [DONE]', async () => {
    const items = chunks(4, 1);
    let i = 0;
    const it: Pollable<StreamPart> = {
      poll: () => {
        if (i < items.length) return { done: false, value: items[i++] as StreamPart };
        throw Object.assign(new Error('boom'), { status: 502 });
      },
      next: async () => {
        throw new Error('not reached');
      },
    };
    const c = await capture({ [Symbol.asyncIterator]: () => it });
    assert.match(c.body, /^data: \{"i":0\}\n\ndata: \{"i":1\}\n\ndata: \{"i":2\}\n\ndata: \{"i":3\}\n\ndata: \{"error":\{/);
    assert.doesNotMatch(c.body, /\[DONE\]/);
    assert.equal(c.writes.length, 2);
    assert.ok(c.ended instanceof Error);
  });
});
