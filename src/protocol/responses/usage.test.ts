import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isContentEvent, isContentEventType, isFinalEvent, usageFromEvent, usageOf } from './usage.ts';

const usage = { input_tokens: 36, input_tokens_details: { cached_tokens: 8 }, output_tokens: 87, output_tokens_details: { reasoning_tokens: 64 }, total_tokens: 123 };

describe('native Responses usage and commit point', () => {
  it('usage from a JSON body', () => {
    assert.deepEqual(usageOf({ id: 'resp_1', object: 'response', usage }), { prompt_tokens: 36, completion_tokens: 87, total_tokens: 123, cached_tokens: 8, reasoning_tokens: 64 });
    assert.equal(usageOf({ id: 'resp_1', usage: null }), undefined);
    assert.equal(usageOf('x'), undefined);
    assert.deepEqual(usageOf({ usage: { input_tokens: 3, output_tokens: 4 } }), { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 });
  });

  it('usage from the terminal events only', () => {
    for (const type of ['response.completed', 'response.incomplete', 'response.failed']) {
      assert.equal(usageFromEvent({ type, sequence_number: 9, response: { usage } })?.total_tokens, 123, type);
    }
    assert.equal(usageFromEvent({ type: 'response.created', response: { usage: null } }), undefined);
    assert.equal(usageFromEvent({ type: 'response.in_progress', response: { usage } }), undefined);
  });

  it('content events: deltas and message/call items, not lifecycle events or a bare reasoning item', () => {
    assert.equal(isContentEvent({ type: 'response.created', response: {} }), false);
    assert.equal(isContentEvent({ type: 'response.in_progress', response: {} }), false);
    assert.equal(isContentEvent({ type: 'response.output_item.added', item: { type: 'reasoning', summary: [] } }), false);
    assert.equal(isContentEvent({ type: 'response.output_item.added', item: { type: 'message', content: [] } }), true);
    assert.equal(isContentEvent({ type: 'response.output_item.added', item: { type: 'function_call' } }), true);
    assert.equal(isContentEvent({ type: 'response.output_text.delta', delta: 'x' }), true);
    assert.equal(isContentEvent({ type: 'response.function_call_arguments.delta', delta: '{' }), true);
    assert.equal(isContentEvent({ type: 'response.reasoning_summary_text.delta', delta: 'x' }), true);
    assert.equal(isContentEventType('response.output_item.added'), false);
    assert.equal(isContentEventType('response.output_item.added', 'custom_tool_call'), true);
  });

  it('final events', () => {
    assert.equal(isFinalEvent({ type: 'response.completed' }), true);
    assert.equal(isFinalEvent({ type: 'error', message: 'x' }), true);
    assert.equal(isFinalEvent({ type: 'response.output_item.done' }), false);
  });
});
