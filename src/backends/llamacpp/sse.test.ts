import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { asErrorData } from './sse.ts';

// The framings themselves are tested on the live path: src/backends/upstream/client.test.ts
// ("llama-server error framings") and test/llamacpp.test.ts (all three, through the gateway).
describe('llama-server SSE error payloads', () => {
  it('asErrorData wraps whatever the error payload was', () => {
    assert.equal(asErrorData('{"error":{"message":"a"}}'), '{"error":{"message":"a"}}');
    assert.equal(asErrorData('{"message":"a"}'), '{"error":{"message":"a"}}');
    assert.equal(asErrorData('"a"'), '{"error":{"message":"a"}}');
    assert.equal(asErrorData('not json'), '{"error":{"message":"not json"}}');
  });
});
