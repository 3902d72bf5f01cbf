import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ChatCompletion } from '../chat/schema.ts';
import { fromChat, type ResponseContext } from './from-chat.ts';
import { parseResponsesRequest } from './schema.ts';
import { toChat } from './to-chat.ts';

function completion(message: Record<string, unknown>, finish = 'stop', usage?: ChatCompletion['usage']): ChatCompletion {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'backend-model',
    choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: null, ...message }, logprobs: null, finish_reason: finish }],
    ...(usage ? { usage } : {}),
  } as ChatCompletion;
}

function ctx(body: Record<string, unknown> = {}): ResponseContext {
  const request = parseResponsesRequest({ model: 'public', input: 'hi', ...body });
  return { id: 'resp_abc', createdAt: 1700000000, model: 'public', request, names: toChat(request).names };
}

/** Every field the SDK's `Response` declares required, and those OpenAI always sends. */
const ALWAYS = [
  'id', 'object', 'created_at', 'status', 'background', 'completed_at', 'error', 'incomplete_details', 'instructions',
  'max_output_tokens', 'max_tool_calls', 'model', 'output', 'parallel_tool_calls', 'previous_response_id',
  'prompt_cache_key', 'reasoning', 'safety_identifier', 'service_tier', 'store', 'temperature', 'text', 'tool_choice',
  'tools', 'top_logprobs', 'top_p', 'truncation', 'usage', 'user', 'metadata',
];

describe('fromChat', () => {
  it('a text answer: every documented field, echoed defaults, message item, usage', () => {
    const res = fromChat(
      completion({ content: 'Hello!' }, 'stop', {
        prompt_tokens: 10,
        completion_tokens: 5,
        total_tokens: 15,
        prompt_tokens_details: { cached_tokens: 4 },
        completion_tokens_details: { reasoning_tokens: 2 },
      }),
      ctx(),
    );
    assert.deepEqual(Object.keys(res).sort(), [...ALWAYS].sort());
    assert.equal('output_text' in res, false, 'output_text is added by the SDK, not sent');
    assert.equal(res.id, 'resp_abc');
    assert.equal(res.object, 'response');
    assert.equal(res.status, 'completed');
    assert.equal(typeof res.completed_at, 'number');
    assert.equal(res.model, 'public');
    assert.equal(res.error, null);
    assert.equal(res.incomplete_details, null);
    assert.deepEqual(
      { t: res.temperature, p: res.top_p, par: res.parallel_tool_calls, tc: res.tool_choice, tools: res.tools, store: (res as unknown as { store: boolean }).store, trunc: res.truncation, text: res.text, meta: res.metadata },
      { t: 1, p: 1, par: true, tc: 'auto', tools: [], store: true, trunc: 'disabled', text: { format: { type: 'text' }, verbosity: 'medium' }, meta: {} },
    );
    assert.equal(res.output.length, 1);
    const msg = res.output[0];
    assert.ok(msg?.type === 'message');
    assert.match(msg.id, /^msg_[0-9a-f]{48}$/);
    assert.deepEqual({ ...msg, id: 'x' }, { id: 'x', type: 'message', status: 'completed', content: [{ type: 'output_text', annotations: [], logprobs: [], text: 'Hello!' }], role: 'assistant' });
    assert.deepEqual(res.usage, {
      input_tokens: 10,
      input_tokens_details: { cached_tokens: 4, cache_write_tokens: 0 },
      output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 2 },
      total_tokens: 15,
    });
  });

  it('echoes the request settings', () => {
    const tools = [{ type: 'function', name: 'f', parameters: {}, strict: true }];
    const res = fromChat(
      completion({ content: 'x' }),
      ctx({ instructions: 'I', max_output_tokens: 50, temperature: 0.3, top_p: 0.5, tools, tool_choice: 'required', parallel_tool_calls: false, text: { format: { type: 'json_object' } }, reasoning: { effort: 'low' }, metadata: { k: 'v' }, store: false, previous_response_id: 'resp_prev', user: 'u' }),
    );
    assert.equal(res.instructions, 'I');
    assert.equal(res.max_output_tokens, 50);
    assert.equal(res.temperature, 0.3);
    assert.equal(res.top_p, 0.5);
    assert.deepEqual(res.tools, tools);
    assert.equal(res.tool_choice, 'required');
    assert.equal(res.parallel_tool_calls, false);
    assert.deepEqual(res.text, { format: { type: 'json_object' }, verbosity: 'medium' });
    assert.deepEqual(res.reasoning, { effort: 'low', summary: null });
    assert.deepEqual(res.metadata, { k: 'v' });
    assert.equal((res as unknown as { store: boolean }).store, false);
    assert.equal(res.previous_response_id, 'resp_prev');
    assert.equal(res.user, 'u');
  });

  it('reasoning, text and tool calls (namespaced names reversed, custom calls) in OpenAI order', () => {
    const c = ctx({ tools: [{ type: 'namespace', name: 'fs', description: '', tools: [{ type: 'function', name: 'read' }] }, { type: 'custom', name: 'apply_patch' }] });
    const res = fromChat(
      completion(
        {
          content: 'Let me look.',
          reasoning_content: 'The user wants a file.',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'fs__read', arguments: '{"p":"a"}' } },
            { id: 'call_2', type: 'custom', custom: { name: 'apply_patch', input: 'diff' } },
          ],
        },
        'tool_calls',
      ),
      c,
    );
    assert.deepEqual(res.output.map((o) => o.type), ['reasoning', 'message', 'function_call', 'custom_tool_call']);
    const [rs, , fc, ctc] = res.output;
    assert.ok(rs?.type === 'reasoning');
    assert.match(rs.id, /^rs_/);
    assert.deepEqual(rs.summary, [{ type: 'summary_text', text: 'The user wants a file.' }]);
    assert.ok(fc?.type === 'function_call');
    assert.match(fc.id ?? '', /^fc_/);
    assert.deepEqual({ ...fc, id: 'x' }, { id: 'x', type: 'function_call', status: 'completed', arguments: '{"p":"a"}', call_id: 'call_1', name: 'read', namespace: 'fs' });
    assert.ok(ctc?.type === 'custom_tool_call');
    assert.deepEqual({ ...ctc, id: 'x' }, { id: 'x', type: 'custom_tool_call', status: 'completed', call_id: 'call_2', input: 'diff', name: 'apply_patch' });
    assert.equal(res.status, 'completed');
  });

  it('tool calls only: no message item; a refusal is a refusal part', () => {
    const calls = fromChat(completion({ tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }, 'tool_calls'), ctx());
    assert.deepEqual(calls.output.map((o) => o.type), ['function_call']);
    const refusal = fromChat(completion({ refusal: 'I cannot.' }), ctx());
    const m = refusal.output[0];
    assert.ok(m?.type === 'message');
    assert.deepEqual(m.content, [{ type: 'refusal', refusal: 'I cannot.' }]);
  });

  it('finish_reason length / content_filter → incomplete with the reason; usage zeros when absent', () => {
    const cut = fromChat(completion({ content: 'Once upon' }, 'length'), ctx());
    assert.equal(cut.status, 'incomplete');
    assert.deepEqual(cut.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(cut.completed_at, null);
    assert.equal(cut.output[0]?.type === 'message' && cut.output[0].status, 'incomplete');
    assert.deepEqual(cut.usage, { input_tokens: 0, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens: 0, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 0 });
    const filtered = fromChat(completion({ content: '' }, 'content_filter'), ctx());
    assert.deepEqual(filtered.incomplete_details, { reason: 'content_filter' });
  });

  it('an empty answer is still one message with empty text', () => {
    const res = fromChat(completion({ content: '' }), ctx());
    const m = res.output[0];
    assert.ok(m?.type === 'message');
    assert.deepEqual(m.content, [{ type: 'output_text', annotations: [], logprobs: [], text: '' }]);
  });

  it('Anthropic-style cache creation counts as cache_write_tokens', () => {
    const res = fromChat(completion({ content: 'x' }, 'stop', { prompt_tokens: 30, completion_tokens: 1, total_tokens: 31, prompt_tokens_details: { cached_tokens: 10, cache_creation_tokens: 20 } as never }), ctx());
    assert.deepEqual(res.usage?.input_tokens_details, { cached_tokens: 10, cache_write_tokens: 20 });
  });
});
