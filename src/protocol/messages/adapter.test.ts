import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ChatCompletion } from '../chat/schema.ts';
import { messagesProtocol, messagesTurn, toChatOptionsFor } from './adapter.ts';
import { gatewaySignature } from './signature.ts';

const body = { model: 'claude', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }], stop_sequences: ['END'] };

describe('messagesProtocol', () => {
  it('parses the client body as it is; the turn keeps it as the native body', () => {
    const req = messagesProtocol.parse(body);
    const turn = messagesTurn(req, { 'anthropic-version': '2023-06-01' });
    assert.equal(turn.nativeBody, req);
    assert.deepEqual(turn.nativeHeaders, { 'anthropic-version': '2023-06-01' });
    assert.equal(messagesProtocol.maxOutputTokensOf(turn), 64);
    assert.ok(messagesProtocol.promptOf(turn).texts.includes('hi'));
  });

  it('nativeHeaders: only the Anthropic headers, a repeated one joined, empty ones left out', () => {
    assert.deepEqual(messagesProtocol.nativeHeaders({ 'anthropic-version': '2023-06-01', 'anthropic-beta': ['a', 'b'], authorization: 'Bearer k' }), {
      'anthropic-version': '2023-06-01',
      'anthropic-beta': 'a,b',
    });
    assert.equal(messagesProtocol.nativeHeaders({ 'anthropic-version': '' }), undefined);
  });

  it('toChatOptionsFor: reasoning history and top_k only when every target is llama-server', () => {
    assert.deepEqual(toChatOptionsFor(['llamacpp', 'llamacpp']), { reasoningContent: true, topK: true });
    assert.deepEqual(toChatOptionsFor(['llamacpp', 'openai']), { reasoningContent: false, topK: false });
    assert.deepEqual(toChatOptionsFor([]), { reasoningContent: false, topK: false });
  });

  it('toChat and fromChat add what they leave out to the turn', () => {
    const turn = messagesTurn(messagesProtocol.parse({ ...body, top_k: 5 }), undefined);
    const chat = messagesProtocol.toChat(turn, ['openai']);
    assert.equal(chat.model, 'claude');
    assert.ok(turn.warnings.some((w) => w.includes('top_k')), turn.warnings.join('; '));
    const completion: ChatCompletion = {
      id: 'c',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hello END' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
    } as ChatCompletion;
    const answer = messagesProtocol.fromChat(completion, turn);
    assert.equal(answer.type, 'message');
    assert.equal(answer.model, 'claude');
    assert.deepEqual(messagesProtocol.usageOf(answer), {
      prompt_tokens: 3,
      completion_tokens: 2,
      total_tokens: 5,
      prompt_tokens_details: { cached_tokens: 0, cache_creation_tokens: 0 },
    });
  });

  it('nativeWarnings: names the gateway-signed thinking blocks a native target is not sent', () => {
    const plain = messagesTurn(messagesProtocol.parse(body), undefined);
    assert.deepEqual(messagesProtocol.nativeWarnings?.(plain), []);
    const thinking = { type: 'thinking', thinking: 't', signature: gatewaySignature('t') };
    const turn = messagesTurn(
      messagesProtocol.parse({ ...body, messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: [thinking, { type: 'text', text: 'a' }] }, { role: 'user', content: 'q2' }] }),
      undefined,
    );
    assert.equal(messagesProtocol.nativeWarnings?.(turn).length, 1);
  });
});
