import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fromLlamaStatus, isLoadingError, llamaStreamError } from './errors.ts';
import { parseSlots } from './monitor.ts';

const map = (status: number, error: Record<string, unknown> | undefined) => fromLlamaStatus({ backend: 'local', status, error, secrets: ['llama-secret-key'] });

describe('llama-server errors → the OpenAI envelope', () => {
  it('503 "Loading model" is not ready (retryable), not broken', () => {
    const e = map(503, { code: 503, message: 'Loading model', type: 'unavailable_error' });
    assert.equal(e.status, 503);
    assert.equal(e.code, 'backend_not_ready');
    assert.equal(e.retryable, true);
    assert.ok((e.retryAfter ?? 0) > 0);
    assert.equal(isLoadingError(503, { message: 'Loading model' }), true);
    assert.equal(isLoadingError(500, { message: 'Loading model' }), false);
  });

  it('501 not_supported_error names the missing flag; retryable so another target may serve', () => {
    const e = map(501, { code: 501, message: 'This server does not support embeddings. Start it with `--embeddings`', type: 'not_supported_error' });
    assert.equal(e.status, 400);
    assert.equal(e.code, 'unsupported');
    assert.equal(e.retryable, true);
    assert.match(e.message, /^llama-server backend "local" was started without --embeddings/);
    const other = map(501, { code: 501, message: 'This server does not support metrics endpoint. Start it with `--metrics`', type: 'not_supported_error' });
    assert.match(other.message, /does not support this request: This server does not support metrics endpoint/);
  });

  it('pooling none and context overflow', () => {
    const p = map(400, { code: 400, message: "Pooling type 'none' is not OAI compatible. Please use a different pooling type", type: 'invalid_request_error' });
    assert.equal(p.code, 'unsupported');
    assert.match(p.message, /--pooling none/);
    const c = map(400, {
      code: 400,
      message: 'request (300 tokens) exceeds the available context size (256 tokens), try increasing it',
      type: 'exceed_context_size_error',
      n_prompt_tokens: 300,
      n_ctx: 256,
    });
    assert.equal(c.status, 400);
    assert.equal(c.code, 'context_length_exceeded');
    assert.equal(c.retryable, false);
  });

  it('everything else takes the common mapping; numeric codes are not passed as codes; secrets are scrubbed', () => {
    const bad = map(400, { code: 400, message: 'invalid grammar', type: 'invalid_request_error' });
    assert.deepEqual([bad.status, bad.code, bad.message, bad.retryable], [400, null, 'invalid grammar', false]);
    const auth = map(401, { code: 401, message: 'Invalid API Key', type: 'authentication_error' });
    assert.deepEqual([auth.status, auth.code], [502, 'upstream_auth_failed']);
    const crash = map(500, { code: 500, message: 'got exception: llama-secret-key leaked', type: 'server_error' });
    assert.deepEqual([crash.status, crash.code, crash.retryable], [502, 'upstream_error', true]);
    assert.ok(!crash.message.includes('llama-secret-key'));
    const busy = map(503, { code: 503, message: 'no slot available', type: 'server_error' });
    assert.equal(busy.code, 'upstream_unavailable');
  });

  it('mid-stream errors', () => {
    const e = llamaStreamError('local', { code: 500, message: 'The model produced output that does not match the expected format', type: 'server_error' }, []);
    assert.equal(e.status, 502);
    assert.equal(e.code, 'upstream_stream_error');
    assert.match(e.message, /mid-stream: The model produced output/);
    assert.match(llamaStreamError('local', 'plain text', []).message, /plain text$/);
  });
});

describe('/slots parsing', () => {
  it('counts slots and busy ones', () => {
    assert.deepEqual(
      parseSlots([
        { id: 0, n_ctx: 512, speculative: false, is_processing: true },
        { id: 1, n_ctx: 512, speculative: false, is_processing: false },
      ]),
      { total: 2, busy: 1 },
    );
    assert.deepEqual(parseSlots([{ id: 0, state: 1 }, { id: 1, state: 0 }]), { total: 2, busy: 1 }, 'older servers: state');
    assert.equal(parseSlots([]), undefined);
    assert.equal(parseSlots({ error: {} }), undefined);
    assert.equal(parseSlots([1, 2]), undefined);
  });
});
