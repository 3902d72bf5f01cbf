/** Liveness and readiness: `/health` is 200 while the process serves; `/ready` turns 503 when not ready or draining. */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startGateway, type TestGateway } from './support/gateway.ts';

const YAML = `
backends: { demo: { type: fake, embedding_dimensions: 8 } }
models:
  chat: { targets: [ { backend: demo, model: echo } ] }
`;

interface Envelope {
  error: { message: string; type: string; param: string | null; code: string | null };
}

async function expect503(res: Response, code: string): Promise<void> {
  assert.equal(res.status, 503);
  assert.equal(res.headers.get('content-type'), 'application/json');
  const retry = Number(res.headers.get('retry-after'));
  assert.ok(Number.isInteger(retry) && retry > 0, `retry-after: ${String(res.headers.get('retry-after'))}`);
  const body = (await res.json()) as Envelope;
  assert.deepEqual(Object.keys(body), ['error']);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(body.error.type, 'service_unavailable_error');
  assert.equal(body.error.code, code);
  assert.equal(body.error.param, null);
  assert.ok(body.error.message.length > 0);
}

describe('health and readiness', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway(YAML);
  });
  after(async () => {
    const lc = gw.running.deps.lifecycle;
    lc.ready = true;
    lc.draining = false;
    await gw.close();
  });

  it('GET /health → 200 {"status":"ok"}', async () => {
    const res = await fetch(`${gw.url}/health`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.match(res.headers.get('x-request-id') ?? '', /^req_[0-9a-f]{32}$/);
    assert.equal(await res.text(), '{"status":"ok"}');
  });

  it('GET /ready → 200 once started', async () => {
    const res = await fetch(`${gw.url}/ready`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/json');
    assert.deepEqual(await res.json(), { status: 'ready', backends: { demo: 'ready' } });
  });

  it('GET /ready → 503 envelope while draining; /health stays 200', async () => {
    const lc = gw.running.deps.lifecycle;
    lc.draining = true;
    try {
      const draining = await fetch(`${gw.url}/ready`);
      // a draining replica will not come back: the balancer need not ask again at once
      assert.equal(draining.headers.get('retry-after'), '5');
      await expect503(draining, 'draining');
      const health = await fetch(`${gw.url}/health`);
      assert.equal(health.status, 200);
      assert.deepEqual(await health.json(), { status: 'ok' });
    } finally {
      lc.draining = false;
    }
    const again = await fetch(`${gw.url}/ready`);
    assert.equal(again.status, 200);
    await again.arrayBuffer();
  });

  it('GET /ready → 503 not_ready before start-up finishes', async () => {
    const lc = gw.running.deps.lifecycle;
    lc.ready = false;
    try {
      await expect503(await fetch(`${gw.url}/ready`), 'not_ready');
    } finally {
      lc.ready = true;
    }
  });

  it('other methods → 405 allow: GET', async () => {
    for (const path of ['/health', '/ready']) {
      const res = await fetch(`${gw.url}${path}`, { method: 'POST' });
      assert.equal(res.status, 405);
      assert.equal(res.headers.get('allow'), 'GET');
      const body = (await res.json()) as Envelope;
      assert.equal(body.error.code, 'method_not_allowed');
    }
  });

  it('the log line names the route', async () => {
    const res = await fetch(`${gw.url}/health`, { headers: { 'x-request-id': 'health-log-1' } });
    await res.arrayBuffer();
    const line = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.request_id === 'health-log-1');
    assert.ok(line);
    assert.equal(line.route, '/health');
    assert.equal(line.status, 200);
  });
});
