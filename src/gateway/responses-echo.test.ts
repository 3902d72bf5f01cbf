import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EventPart } from '../protocol/stream-part.ts';
import { echoPreviousId, echoPreviousIdInEvent } from './responses-echo.ts';

describe('echoPreviousId', () => {
  it('a copy naming the id, members in their order; the answer itself when it names it already', () => {
    const answer = { id: 'resp_1', object: 'response', previous_response_id: null, output: [] };
    const out = echoPreviousId(answer, 'resp_0');
    assert.deepEqual(Object.keys(out), Object.keys(answer));
    assert.equal(out.previous_response_id, 'resp_0');
    assert.equal(answer.previous_response_id, null, 'the upstream answer is not changed (a coalesced request may share it)');
    assert.equal(echoPreviousId(out, 'resp_0'), out);
  });

  it('events that carry the response are printed again with the id; others pass as they are', () => {
    const created = new EventPart('response.created', '{"type":"response.created","sequence_number":0,"response":{"id":"r","previous_response_id":null,"status":"in_progress"}}', false, false, true);
    const out = echoPreviousIdInEvent(created, 'resp_"0"');
    assert.equal(out.event, 'response.created');
    assert.deepEqual(JSON.parse(out.data), { type: 'response.created', sequence_number: 0, response: { id: 'r', previous_response_id: 'resp_"0"', status: 'in_progress' } });
    const completed = new EventPart('response.completed', '{"type":"response.completed","response":{"previous_response_id":null}}', false, true);
    completed.usage = { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 };
    const done = echoPreviousIdInEvent(completed, 'p');
    assert.equal(done.final, true);
    assert.deepEqual(done.usage, completed.usage, 'usage read on the way stays with the part');
    const delta = new EventPart('response.output_text.delta', '{"type":"response.output_text.delta","delta":"previous_response_id"}', true);
    assert.equal(echoPreviousIdInEvent(delta, 'p'), delta);
    const same = new EventPart('response.completed', '{"response":{"previous_response_id":"p"}}', false, true);
    assert.equal(echoPreviousIdInEvent(same, 'p'), same);
  });
});
