import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fromUpstreamStatus, upstreamTimeout, upstreamUnreachable, clientClosed } from '../backends/upstream/errors.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { backoffMs, disposition } from './retry.ts';

const up = (status: number) => fromUpstreamStatus({ backend: 'b', status, error: { message: 'x' }, secrets: [] });

describe('disposition (error classification)', () => {
  it('client faults are fatal: no retry, no failover', () => {
    for (const s of [400, 404, 413, 422]) assert.equal(disposition(up(s)), 'fatal', String(s));
    assert.equal(disposition(clientClosed()), 'fatal');
  });
  it("a backend's refusal of a parameter is fatal even when marked retryable: no failover hides it", () => {
    for (const code of ['unsupported_parameter', 'unsupported_value']) {
      const e = new GatewayError('Unsupported parameter', { status: 400, type: 'invalid_request_error', code, param: 'tools[0]', retryable: true });
      assert.equal(disposition(e), 'fatal', code);
    }
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
