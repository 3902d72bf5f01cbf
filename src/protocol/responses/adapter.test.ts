import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ChatCompletion } from '../chat/schema.ts';
import { responsesProtocol, responsesTurn } from './adapter.ts';
import type { InputItem } from './schema.ts';

describe('responsesProtocol', () => {
  it('a turn without a conversation: the client body is the native body; the answer gets the turn id', () => {
    const req = responsesProtocol.parse({ model: 'gpt', input: 'hi', max_output_tokens: 16 });
    const turn = responsesTurn(req);
    assert.equal(turn.nativeBody, req);
    assert.match(turn.ctx.id, /^resp_/);
    assert.equal(responsesProtocol.nativeHeaders({ 'openai-beta': 'x' }), undefined);
    assert.equal(responsesProtocol.maxOutputTokensOf(turn), 16);
    assert.deepEqual(responsesProtocol.promptOf(turn), { texts: ['hi'], fixed: 3 });
    const chat = responsesProtocol.toChat(turn, ['openai']);
    assert.deepEqual(chat.messages, [{ role: 'user', content: 'hi' }]);
    const completion = {
      id: 'c',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
    } as ChatCompletion;
    const answer = responsesProtocol.fromChat(completion, turn);
    assert.equal(answer.id, turn.ctx.id);
    assert.equal(responsesProtocol.usageOf(answer)?.total_tokens, 4);
  });

  it('a conversation: its history goes ahead of the input in chat and in the prompt; references resolve through it', () => {
    const history: InputItem[] = [
      { type: 'message', role: 'user', content: 'first' },
      { type: 'message', id: 'msg_1', role: 'assistant', content: [{ type: 'output_text', text: 'answer' }] },
    ] as InputItem[];
    const req = responsesProtocol.parse({ model: 'gpt', previous_response_id: 'resp_0', input: [{ type: 'item_reference', id: 'msg_1' }] });
    const byId = new Map(history.map((h) => [h.id as string, h]));
    const nativeBody = { model: 'gpt', input: [...history, history[1]] };
    const turn = responsesTurn(req, { history, resolveItem: (id) => byId.get(id), input: [history[1] as InputItem], nativeBody });
    assert.equal(turn.nativeBody, nativeBody);
    const chat = responsesProtocol.toChat(turn, []);
    assert.deepEqual(
      chat.messages.map((m) => m.role),
      ['user', 'assistant', 'assistant'],
    );
    const prompt = responsesProtocol.promptOf(turn);
    assert.deepEqual(prompt.texts, ['first', 'answer', 'answer']);
    assert.equal(prompt.fixed, 9);
  });
});
