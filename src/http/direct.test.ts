/**
 * abandonIfStuck: the send timeout behind server.send_timeout_ms, on a real node:http response
 * whose client does not read (the end-to-end stream case is in test/hostile-clients.test.ts).
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { abandonIfStuck } from './direct.ts';

/** A server whose one response gets `body` written, to a client that never reads. */
async function stuckResponse(bytes: number): Promise<{ res: http.ServerResponse; finished: boolean; close(): Promise<void>; client: net.Socket }> {
  let resolveRes: (r: http.ServerResponse) => void = () => {};
  const got = new Promise<http.ServerResponse>((r) => (resolveRes = r));
  const server = http.createServer((_req, res) => resolveRes(res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  client.on('error', () => {});
  client.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  client.pause();
  const res = await got;
  res.writeHead(200, { 'content-length': String(bytes) });
  res.end(Buffer.alloc(bytes, 0x61));
  return {
    res,
    finished: res.writableFinished,
    client,
    close: () =>
      new Promise<void>((r) => {
        client.destroy();
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

describe('abandonIfStuck', () => {
  test('an answer the client never takes is destroyed after the timeout', async () => {
    // far more than loopback socket buffers hold
    const s = await stuckResponse(64 * 1024 * 1024);
    try {
      assert.equal(s.finished, false, 'the answer could not be handed to the OS at once');
      const started = Date.now();
      const ok = await abandonIfStuck(s.res, 'finish', 300);
      assert.equal(ok, false);
      assert.ok(s.res.destroyed, 'the response (and its connection) was destroyed');
      assert.ok(Date.now() - started >= 250, 'not before the timeout');
    } finally {
      await s.close();
    }
  });

  test('an answer the client takes in time is left alone', async () => {
    const s = await stuckResponse(8 * 1024 * 1024);
    try {
      let received = 0;
      s.client.on('data', (d: Buffer) => (received += d.length));
      const p = abandonIfStuck(s.res, 'finish', 10_000);
      s.client.resume();
      assert.equal(await p, true);
      await new Promise((r) => setTimeout(r, 100));
      assert.ok(received > 8 * 1024 * 1024, `the client got the whole answer (${received} bytes)`);
      assert.equal(s.client.destroyed, false, 'the connection stays open (keep-alive)');
      assert.equal(s.client.readableEnded, false);
    } finally {
      await s.close();
    }
  });
});
