import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fromUpstreamStatus, upstreamTimeout, upstreamUnreachable, clientClosed } from '../errors/upstream.ts';
import { fromLlamaStatus } from '../backends/llamacpp/errors.ts';
import { GatewayError, unsupported } from '../errors/gateway-error.ts';
import { backoffMs, disposition } from './retry.ts';

const up = (status: number) => fromUpstreamStatus({ backend: 'b', status, error: { message: 'x' }, secrets: [] });

describe('disposition (error classification)', () => {
  it('client faults are fatal: no retry, no failover', () => {
    for (const s of [400, 404, 413, 422]) assert.equal(disposition(up(s)), 'fatal', String(s));
    assert.equal(disposition(clientClosed()), 'fatal');
  });
  it("a backend's refusal of a parameter is fatal: no failover hides it", () => {
    for (const code of ['unsupported_parameter', 'unsupported_value'] as const) {
      const e = new GatewayError(code, 'Unsupported parameter', { param: 'tools[0]', backend: 'b' });
      assert.equal(disposition(e), 'fatal', code);
    }
  });
  it('an upstream code shown to the client does not change the classification', () => {
    const e = fromUpstreamStatus({ backend: 'b', status: 400, error: { message: 'too long', code: 'upstream_timeout' }, secrets: [] });
    assert.deepEqual([e.status, e.code, disposition(e)], [400, 'upstream_timeout', 'fatal']);
    const r = fromUpstreamStatus({ backend: 'b', status: 429, error: { message: 'slow down', code: 'circuit_open' }, secrets: [] });
    assert.deepEqual([r.status, r.code, disposition(r)], [429, 'circuit_open', 'retry']);
  });
  it('a local server that lacks a feature the request needs: the next target may have it', () => {
    const e = fromLlamaStatus({ backend: 'b', status: 501, error: { message: 'This server does not support embeddings', type: 'not_supported_error' }, secrets: [] });
    assert.deepEqual([e.status, e.code, disposition(e)], [400, 'unsupported', 'failover']);
    assert.equal(disposition(unsupported('images of this kind cannot be translated')), 'fatal');
  });
  it('transient upstream conditions are retried: 408?, 409, 429, 5xx, 529, connection errors', () => {
    for (const s of [409, 429, 500, 502, 503, 529]) assert.equal(disposition(up(s)), 'retry', String(s));
    assert.equal(disposition(upstreamUnreachable('b', 'ECONNREFUSED')), 'retry');
  });
  it('timeouts, bad upstream credentials and garbage go straight to the next target', () => {
    assert.equal(disposition(up(408)), 'failover');
    assert.equal(disposition(up(504)), 'failover');
    assert.equal(disposition(up(401)), 'failover');
    assert.equal(disposition(up(403)), 'failover');
    assert.equal(disposition(upstreamTimeout('b', 10)), 'failover');
  });
});

describe('backoffMs', () => {
  const cfg = { max_retries: 3, base_delay_ms: 100, max_delay_ms: 1000 };
  it('grows exponentially with equal jitter and is capped', () => {
    assert.equal(backoffMs(1, cfg, () => 0), 50);
    assert.equal(backoffMs(1, cfg, () => 0.999999), 100);
    assert.equal(backoffMs(2, cfg, () => 0), 100);
    assert.equal(backoffMs(3, cfg, () => 0), 200);
    assert.equal(backoffMs(10, cfg, () => 1), 1000);
    assert.equal(backoffMs(10, cfg, () => 0), 500);
  });
  it('honours retry-after when the upstream gave one', () => {
    assert.equal(backoffMs(1, cfg, () => 0.5, 2), 2000);
    assert.equal(backoffMs(1, cfg, () => 0.5, 0.25), 250);
  });
});
