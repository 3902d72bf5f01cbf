import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ErrorCode } from '../../errors/codes.ts';
import { GatewayError, invalidRequest, payloadTooLarge, unauthorized } from '../../errors/gateway-error.ts';
import { anthropicErrorResponse, errorFrame, toAnthropicError } from './errors.ts';

const err = (code: ErrorCode, extra: ConstructorParameters<typeof GatewayError>[2] = {}) => new GatewayError(code, 'boom', extra);

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
      [err('upstream_payment_required'), 402, 'billing_error'],
      [err('admin_disabled'), 403, 'permission_error'],
      [err('model_not_found'), 404, 'not_found_error'],
      [err('method_not_allowed'), 405, 'invalid_request_error'],
      [payloadTooLarge(10), 413, 'request_too_large'],
      [err('upstream_rejected', { upstreamStatus: 422 }), 422, 'invalid_request_error'],
      [err('rate_limit_exceeded'), 429, 'rate_limit_error'],
      [err('budget_exceeded'), 429, 'rate_limit_error'],
      [err('upstream_rate_limited'), 429, 'rate_limit_error'],
      [err('internal_error'), 500, 'api_error'],
      [err('upstream_error'), 502, 'api_error'],
      [err('upstream_timeout'), 504, 'timeout_error'],
      [err('circuit_open'), 529, 'overloaded_error'],
      [err('server_overloaded'), 529, 'overloaded_error'],
      [err('upstream_unavailable'), 529, 'overloaded_error'],
    ];
    for (const [e, status, type] of cases) {
      const r = anthropicErrorResponse(e);
      assert.equal(r.status, status, `${e.status}`);
      assert.equal(r.body.error.type, type, `${e.status}`);
    }
  });

  it("keeps the gateway's retry headers: a 503 answered as 529 still says retry-after, an exhausted one x-should-retry: false", () => {
    const e = err('circuit_open', { retryAfter: 7 });
    e.exhausted = true;
    const r = anthropicErrorResponse(e);
    assert.equal(r.status, 529);
    assert.equal(r.headers['retry-after'], '7');
    assert.equal(r.headers['x-should-retry'], 'false');
    assert.equal(anthropicErrorResponse(err('rate_limit_exceeded', { retryAfter: 2 })).headers['retry-after'], '2');
  });

  it('frames the mid-stream error event as Anthropic does', () => {
    assert.equal(
      errorFrame(err('backend_not_ready')),
      'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"boom"}}\n\n',
    );
  });
});
