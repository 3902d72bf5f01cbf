import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import type { ChatCompletion } from '../chat/schema.ts';
import { fromChat, toMessagesUsage } from './from-chat.ts';

function completion(message: Record<string, unknown>, finish: string, extra: Record<string, unknown> = {}): ChatCompletion {
  return {
    id: 'chatcmpl-abc.1',
    object: 'chat.completion',
    created: 1,
    model: 'backend-model',
    choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: null, ...message }, logprobs: null, finish_reason: finish, ...extra }],
    usage: { prompt_tokens: 120, completion_tokens: 7, total_tokens: 127, prompt_tokens_details: { cached_tokens: 100 } },
  } as ChatCompletion;
}

describe('chat completion → Message', () => {
  it('writes the Message object as Anthropic documents it, named by the public model', () => {
    const { message, warnings } = fromChat(completion({ content: 'Hello!' }, 'stop'), { model: 'claude-sonnet-4-5' });
    assert.deepEqual(message, {
      id: 'msg_chatcmpl-abc_1',
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-5',
      content: [{ type: 'text', text: 'Hello!' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      stop_details: null,
      container: null,
      usage: { input_tokens: 20, output_tokens: 7, cache_creation_input_tokens: 0, cache_read_input_tokens: 100 },
    });
    assert.deepEqual(warnings, []);
  });

  it('turns tool calls into tool_use blocks (ids kept or made acceptable), thinking first', () => {
    const { message } = fromChat(
      completion(
        {
          content: 'Let me check.',
          reasoning_content: 'The user wants weather.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
            { id: 'call:2', type: 'function', function: { name: 'now', arguments: '' } },
          ],
        },
        'tool_calls',
      ),
      { model: 'm' },
    );
    assert.deepEqual(message.content, [
      { type: 'thinking', thinking: 'The user wants weather.', signature: `swy1.${createHash('sha256').update('The user wants weather.').digest('base64url')}` },
      { type: 'text', text: 'Let me check.' },
      { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'call_2', name: 'now', input: {} },
    ]);
    assert.equal(message.stop_reason, 'tool_use');
    assert.equal(fromChat(completion({ reasoning_content: 'x', content: 'y' }, 'stop'), { model: 'm', omitThinking: true }).message.content.length, 1);
  });

  it('sends arguments that are not a JSON object as input {} with a warning', () => {
    const { message, warnings } = fromChat(
      completion({ tool_calls: [{ id: '', type: 'function', function: { name: 'f', arguments: '{"a": ' } }] }, 'tool_calls'),
      { model: 'm' },
    );
    const block = message.content[0];
    assert.equal(block?.type, 'tool_use');
    assert.deepEqual(block?.type === 'tool_use' && block.input, {});
    assert.match(block?.type === 'tool_use' ? block.id : '', /^toolu_[A-Za-z0-9_-]+$/);
    assert.match(warnings[0] ?? '', /tool call "f": arguments are not a JSON object/);
  });

  it('maps finish reasons to stop reasons', () => {
    const stop = (finish: string, msg: Record<string, unknown> = { content: 'x' }, extra = {}, stopSequences?: string[]) =>
      fromChat(completion(msg, finish, extra), { model: 'm', stopSequences }).message;
    assert.equal(stop('stop').stop_reason, 'end_turn');
    assert.equal(stop('length').stop_reason, 'max_tokens');
    assert.equal(stop('content_filter').stop_reason, 'refusal');
    assert.equal(stop('stop', { content: null, refusal: 'I cannot help with that.' }).stop_reason, 'refusal');
    assert.deepEqual(stop('stop', { content: null, refusal: 'I cannot help with that.' }).content, [{ type: 'text', text: 'I cannot help with that.' }]);
    assert.equal(stop('stop', { tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }).stop_reason, 'tool_use');
    // vLLM reports the matched stop string as choice.stop_reason, llama-server as stopping_word
    const vllm = stop('stop', { content: 'x' }, { stop_reason: 'END' }, ['END']);
    assert.deepEqual([vllm.stop_reason, vllm.stop_sequence], ['stop_sequence', 'END']);
    const llama = stop('stop', { content: 'x' }, { stopping_word: '###' }, ['END', '###']);
    assert.deepEqual([llama.stop_reason, llama.stop_sequence], ['stop_sequence', '###']);
    const unknown = stop('stop', { content: 'x' }, { stop_reason: 128001 }, ['END']);
    assert.deepEqual([unknown.stop_reason, unknown.stop_sequence], ['end_turn', null]);
  });

  it('reads usage: input excludes cache reads and writes, missing usage is zeros', () => {
    assert.deepEqual(toMessagesUsage({ prompt_tokens: 50, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 10, cache_creation_tokens: 30 } }), {
      input_tokens: 10,
      output_tokens: 5,
      cache_creation_input_tokens: 30,
      cache_read_input_tokens: 10,
    });
    assert.deepEqual(toMessagesUsage(undefined), { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
  });
});
