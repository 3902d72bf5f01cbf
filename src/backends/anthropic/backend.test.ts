/**
 * AnthropicBackend.mapError: every Anthropic status and error type → the GatewayError clients get
 * (status, OpenAI type, code, retryable for the router, retry-after), with the key never shown.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { anthropicBackendSchema } from '../../config/schema.ts';
import { GatewayError } from '../../errors/gateway-error.ts';
import { AnthropicBackend, normalizeBaseURL } from './backend.ts';

const KEY = 'sk-ant-api03-unit-test-secret';
const backend = new AnthropicBackend('claude', anthropicBackendSchema.parse({ type: 'anthropic', api_key: KEY }));
// the SDK is imported when the backend loads
before(() => backend.load());
after(() => backend.close());

function mapped(status: number | undefined, type: string, message: string, headers: Record<string, string> = {}): GatewayError {
  const body = { type: 'error', error: { type, message }, request_id: 'req_1' };
  const err = status === undefined ? new Anthropic.APIError(undefined, body, undefined, undefined) : Anthropic.APIError.generate(status, body, undefined, new Headers(headers));
  const e = backend.mapError(err);
  assert.ok(e instanceof GatewayError, `got ${String(e)}`);
  return e;
}

describe('AnthropicBackend.mapError', () => {
  test('statuses and types → OpenAI envelope fields', () => {
    const table: Array<[number, string, number, string, string | null, boolean]> = [
      // upstream status, Anthropic type → client status, OpenAI type, code, retryable
      [400, 'invalid_request_error', 400, 'invalid_request_error', null, false],
      [401, 'authentication_error', 502, 'upstream_error', 'upstream_auth_failed', true],
      [402, 'billing_error', 502, 'upstream_error', 'upstream_auth_failed', true],
      [403, 'permission_error', 502, 'upstream_error', 'upstream_auth_failed', true],
      [404, 'not_found_error', 404, 'invalid_request_error', 'model_not_found', false],
      [413, 'request_too_large', 413, 'invalid_request_error', 'request_too_large', false],
      [429, 'rate_limit_error', 429, 'rate_limit_error', 'rate_limit_exceeded', true],
      [500, 'api_error', 502, 'upstream_error', 'upstream_error', true],
      [504, 'timeout_error', 504, 'timeout_error', 'upstream_timeout', true],
      [529, 'overloaded_error', 503, 'service_unavailable_error', 'upstream_unavailable', true],
    ];
    for (const [up, type, status, oType, code, retryable] of table) {
      const e = mapped(up, type, `problem (${type})`);
      assert.deepEqual([e.status, e.type, e.code, e.retryable], [status, oType, code, retryable], `${up} ${type}`);
      assert.equal(e.backend, 'claude');
    }
  });

  test('client-fault messages are passed on; "prompt is too long" is context_length_exceeded', () => {
    const e = mapped(400, 'invalid_request_error', 'prompt is too long: 210000 tokens > 200000 maximum');
    assert.equal(e.message, 'prompt is too long: 210000 tokens > 200000 maximum');
    assert.equal(e.code, 'context_length_exceeded');
  });

  test('retry-after is kept (seconds or retry-after-ms)', () => {
    assert.equal(mapped(429, 'rate_limit_error', 'slow', { 'retry-after': '12' }).retryAfter, 12);
    assert.equal(mapped(529, 'overloaded_error', 'busy', { 'retry-after-ms': '1500' }).retryAfter, 1.5);
  });

  test('the gateway key never appears in a message', () => {
    for (const s of [401, 500, undefined]) assert.doesNotMatch(mapped(s, 'api_error', `bad key ${KEY}`).message, /unit-test-secret/);
  });

  test('an error without a status (a stream error event) is retryable; overloaded is a 503', () => {
    const e = mapped(undefined, 'api_error', 'Internal server error');
    assert.deepEqual([e.status, e.code, e.retryable], [502, 'upstream_stream_error', true]);
    assert.equal(mapped(undefined, 'overloaded_error', 'Overloaded').status, 503);
  });

  test('aborts pass through untouched; connection failures are upstream_unreachable', () => {
    const abort = new Anthropic.APIUserAbortError();
    assert.equal(backend.mapError(abort), abort);
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const e = backend.mapError(new Anthropic.APIConnectionError({ cause: new TypeError('fetch failed', { cause: refused }) }));
    assert.ok(e instanceof GatewayError);
    assert.equal(e.code, 'upstream_unreachable');
    assert.match(e.message, /ECONNREFUSED/);
  });

  test('base_url: a trailing /v1 and slashes are removed (the SDK adds /v1/messages)', () => {
    assert.equal(normalizeBaseURL('https://api.anthropic.com/v1/'), 'https://api.anthropic.com');
    assert.equal(normalizeBaseURL('http://proxy.local/anthropic'), 'http://proxy.local/anthropic');
  });

  test('no embeddings or legacy completions capability', () => {
    assert.deepEqual(backend.capabilities, { chat: true, embeddings: false, completions: false });
  });
});
