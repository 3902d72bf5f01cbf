/**
 * Resource limits at the edge: oversized headers and unparsable HTTP get the JSON envelope (not
 * Node's bare status line), and a process at its concurrency limit answers 503 + retry-after at
 * once instead of queueing.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './support/gateway.ts';

function rawRequest(url: string, payload: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(port), hostname, () => sock.write(payload));
    let data = '';
    sock.on('data', (d) => (data += d.toString()));
    sock.on('end', () => resolve(data));
    sock.on('close', () => resolve(data));
    sock.on('error', reject);
    setTimeout(() => sock.destroy(), 5000);
  });
}

describe('edge limits', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway(`
server: { max_concurrent_requests: 2 }
backends: { slow: { type: fake, chunk_delay_ms: 200 }, fast: { type: fake } }
models:
  slow: { targets: [ { backend: slow, model: echo } ] }
  fast: { targets: [ { backend: fast, model: echo } ] }
`);
  });
  after(() => gw.close());

  it('headers over the size limit → 431 with the OpenAI envelope', async () => {
    const res = await rawRequest(gw.url, `GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(100_000)}\r\n\r\n`);
    assert.match(res, /^HTTP\/1\.1 431 /);
    assert.match(res, /content-type: application\/json/i);
    const body = JSON.parse(res.slice(res.indexOf('\r\n\r\n') + 4)) as { error: { code: string; type: string } };
    assert.equal(body.error.code, 'headers_too_large');
    assert.equal(body.error.type, 'invalid_request_error');
  });

  it('garbage instead of HTTP → 400 with the envelope', async () => {
    const res = await rawRequest(gw.url, 'HELLO THERE\r\n\r\n');
    assert.match(res, /^HTTP\/1\.1 400 /);
    assert.match(res, /"type":"invalid_request_error"/);
  });

  it('over max_concurrent_requests → 503 server_overloaded with retry-after, and recovers', async () => {
    const stream = (): Promise<Response> =>
      fetch(`${gw.baseURL}/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ model: 'slow', stream: true, messages: [{ role: 'user', content: 'a b c d e' }] }),
      });
    const a = await stream();
    const b = await stream();
    const c = await fetch(`${gw.baseURL}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'fast', messages: [{ role: 'user', content: 'x' }] }) });
    assert.equal(c.status, 503);
    assert.equal(c.headers.get('retry-after'), '1');
    assert.equal(((await c.json()) as { error: { code: string } }).error.code, 'server_overloaded');
    await a.text();
    await b.text();
    await new Promise((r) => setTimeout(r, 50));
    const d = await fetch(`${gw.baseURL}/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'fast', messages: [{ role: 'user', content: 'x' }] }) });
    assert.equal(d.status, 200, 'slots are released when streams end');
    const health = await fetch(`${gw.url}/health`);
    assert.equal(health.status, 200);
  });
});
