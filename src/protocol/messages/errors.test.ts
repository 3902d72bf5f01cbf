import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayError, invalidRequest, payloadTooLarge, unauthorized } from '../../errors/gateway-error.ts';
import { anthropicErrorResponse, errorFrame, toAnthropicError } from './errors.ts';

const err = (status: number, type: ConstructorParameters<typeof GatewayError>[1]['type'], extra: Partial<ConstructorParameters<typeof GatewayError>[1]> = {}) =>
  new GatewayError('boom', { status, type, ...extra });

describe('Anthropic error envelope', () => {
  it('writes {"type":"error","error":{type,message}} with request_id when known', () => {
    assert.deepEqual(toAnthropicError(invalidRequest('bad field', 'max_tokens'), 'req_1'), {
      type: 'error',
      error: { type: 'invalid_request_error', message: 'bad field' },
      request_id: 'req_1',
    });
    assert.deepEqual(Object.keys(toAnthropicError(invalidRequest('x'))), ['type', 'error']);
  });

  it('maps statuses to Anthropic types', () => {
    const cases: Array<[GatewayError, number, string]> = [
      [invalidRequest('x'), 400, 'invalid_request_error'],
      [unauthorized('x'), 401, 'authentication_error'],
      [err(403, 'permission_error'), 403, 'permission_error'],
      [err(404, 'invalid_request_error', { code: 'model_not_found' }), 404, 'not_found_error'],
      [err(405, 'invalid_request_error'), 405, 'invalid_request_error'],
      [payloadTooLarge(10), 413, 'request_too_large'],
      [err(429, 'rate_limit_error'), 429, 'rate_limit_error'],
      [err(429, 'insufficient_quota'), 429, 'rate_limit_error'],
      [err(500, 'server_error'), 500, 'api_error'],
      [err(502, 'upstream_error'), 502, 'api_error'],
      [err(504, 'timeout_error'), 504, 'timeout_error'],
      [err(503, 'service_unavailable_error'), 529, 'overloaded_error'],
    ];
    for (const [e, status, type] of cases) {
      const r = anthropicErrorResponse(e);
      assert.equal(r.status, status, `${e.status}`);
      assert.equal(r.body.error.type, type, `${e.status}`);
    }
  });

  it("keeps the gateway's retry headers: a 503 answered as 529 still says retry-after, an exhausted one x-should-retry: false", () => {
    const e = err(503, 'service_unavailable_error', { retryAfter: 7 });
    e.exhausted = true;
    const r = anthropicErrorResponse(e);
    assert.equal(r.status, 529);
    assert.equal(r.headers['retry-after'], '7');
    assert.equal(r.headers['x-should-retry'], 'false');
    assert.equal(anthropicErrorResponse(err(429, 'rate_limit_error', { retryAfter: 2 })).headers['retry-after'], '2');
  });

  it('frames the mid-stream error event as Anthropic does', () => {
    assert.equal(
      errorFrame(err(503, 'service_unavailable_error')),
      'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"boom"}}\n\n',
    );
  });
});
